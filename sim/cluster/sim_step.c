// sim/cluster/sim_step.c -- batch steps: costing a step on the pool's step model, starting it,
// and the instance's two entry points: sim_inst_kick (something changed: start a step if the
// instance can) and sim_inst_step_done. What a step holds is the pool's (sim_pool.h).
//
// Invariant: one STEP_DONE event per batch step (or per run of identical decode steps);
// tokens advance by arithmetic, never one event per token.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_cluster.h"
#include "sim_run.h"
#include "sim_sample.h"
#include "sim_trace.h"

// The stepper's answer for b. DSpark (nv > 0): the first nv listed sequences verify a block
// each (new_tokens == block, plus the draft pass: mdl_spec_step_cost); the rest (KV rebuilt
// after a preemption, prefill chunks) are a prefill step of their own, run back to back in
// the same event.
static void stepper_cost(sim_cluster *c, sim_pool *p, const mdl_batch *b, uint32_t nv,
                         mdl_step_cost *out) {
    if (!nv) {
        mdl_stepper_cost(p->stepper, b, out);
        return;
    }
    KVF_ASSERT(c->dspark && nv <= b->n && !b->dsum);
    mdl_batch v = {.phase = MDL_DECODE, .seqs = b->seqs, .n = nv};
    mdl_spec_step_cost(p->stepper, &c->spec, &v, out, NULL);
    if (b->n > nv) {
        mdl_batch rest = {.phase = MDL_PREFILL, .seqs = b->seqs + nv, .n = b->n - nv};
        mdl_step_cost k;
        mdl_stepper_cost(p->stepper, &rest, &k);
        out->ns += k.ns;
        out->flops += k.flops;
        out->bytes += k.bytes;
        out->comm_bytes += k.comm_bytes;
        out->comm_ns += k.comm_ns;
        out->host_ns += k.host_ns;
        out->extrapolated |= k.extrapolated;
        out->table_fallback |= k.table_fallback;
    }
}

// The serving engine's CPU work per step (scheduling, sampling, detokenising) that does not
// overlap the GPU: a fixed part and a part per sequence of the batch.
static int64_t serving_step_ns(const sim_cluster *c, double seqs) {
    const sim_serving_cfg *sv = &c->cfg->serving;
    if (!(sv->step_overhead_ns > 0 || sv->step_overhead_seq_ns > 0)) return 0;
    return (int64_t)llround(sv->step_overhead_ns + sv->step_overhead_seq_ns * seqs);
}

// A step over MDL_MAX_STEP_NS ends the run with this error (once).
static void step_too_long(sim_cluster *c) {
    if (c->status != KVF_OK) return;
    kvf_fail(c->err, KVF_EINVAL,
             "one batch step would take over an hour of simulated time: the model is far too "
             "large for the hardware and efficiency factors (keys model, hardware, efficiency.*)");
    sim_fail_run(c, KVF_EINVAL);
}

static void step_cost(sim_cluster *c, sim_pool *p, mdl_phase phase, uint32_t n, uint32_t nv,
                      uint32_t images, const mdl_decode_sum *ds, mdl_step_cost *out) {
    if (c->cfg->moe.skew_sd > 0 && c->model.experts) {
        // the hottest GPU's load varies step to step; the step waits for it
        double sk = c->ep_skew_base + c->cfg->moe.skew_sd * kvf_rng_normal(&c->rng_skew);
        p->stepper->par.ep_skew = sk > 1 ? sk : 1;
    }
    mdl_batch b = {
        .phase = phase, .seqs = c->seqs, .n = n, .images = images, .dsum = ds && ds->n ? ds : NULL};
    stepper_cost(c, p, &b, nv, out);
    out->ns += serving_step_ns(c, (double)n + (ds ? ds->n : 0));
    if (out->ns > (int64_t)MDL_MAX_STEP_NS) step_too_long(c);
    if (out->ns < 1) out->ns = 1;
    c->m.steps++;
    if (out->extrapolated) c->m.extrapolated_steps++;
    if (out->table_fallback) c->m.table_fallbacks++;
}

void sim_step_cost(sim_cluster *c, sim_pool *p, mdl_phase phase, uint32_t n, uint32_t images,
                   const mdl_decode_sum *ds, mdl_step_cost *out) {
    step_cost(c, p, phase, n, 0, images, ds, out);
}

double sim_cluster_prefill_s(sim_cluster *c, sim_pool *p, uint32_t tokens, uint32_t cached) {
    mdl_seq s = {.new_tokens = tokens ? tokens : 1, .cached_tokens = cached};
    mdl_batch b = {.phase = MDL_PREFILL, .seqs = &s, .n = 1};
    mdl_step_cost k;
    // direct vtable call: router estimates are not steps and are not counted
    p->stepper->vt->cost(p->stepper, &b, &k);
    return (double)k.ns * 1e-9;
}

// The end of the step in flight, in the instance's queue slot. An instance keeping decode sums
// ends its steps before anything else at their instant (a first event), so whatever reads its KV at
// that time (a decode router, the sampler, the autoscaler) sees every step ended by then, in a run
// of steps or one by one alike (sim_inst_kv_used).
// A run costed in pages: an early event at the end of each page but the last, the run's own
// seq (given out as it was formed) on the last; so everything else pops and peeks as with the
// run costed whole.
static void push_step_done(sim_cluster *c, sim_inst *in) {
    sim_event ev = {.t = in->step_end, .dst = in->id, .kind = SIM_EV_STEP_DONE};
    if (in->run_more) {
        sim_queue_slot_push_early(c->q, in->id, &ev);
    } else if (in->run_seq) {
        sim_queue_slot_push_seq(c->q, in->id, &ev, in->run_seq);
        in->run_seq = 0;
    } else {
        sim_queue_slot_push(c->q, in->id, &ev, in->dsum_on);
    }
}

// n sequences computing tokens new tokens in all (timeline only).
void sim_step_begin(sim_cluster *c, sim_inst *in, const mdl_step_cost *k, uint32_t n,
                    uint64_t tokens) {
    if (c->timeline) {
        static const char *names[] = {"prefill", "decode", "mixed", "vision"};
        int ph = in->pool == SIM_POOL_VISION    ? 3
                 : in->n_running && in->n_batch ? 2
                 : in->n_running                ? 1
                                                : 0;
        sim_trace_step(c->timeline, c->now, k->ns, in->pool, in->idx, names[ph], n, tokens,
                       k->flops, k->bytes);
    }
    if (in->n_lag) {
        // first tokens of the step that just ended reach their clients after this step's share
        // (a step started later, after an idle gap, found the pipeline flushed)
        double lag = c->cfg->serving.first_token_lag_steps;
        sim_time d = in->run_m > 1 ? in->run_end[0] - c->now : k->ns;
        for (uint32_t i = 0; in->lag_at == c->now && i < in->n_lag; i++) {
            sim_req *r = sim_req_at(c, in->lag_wait[i]);
            if (r->first_ns == in->lag_at && r->produced == 1)
                r->first_lag_ns = (sim_time)llround(lag * (double)d);
        }
        in->n_lag = 0;
    }
    in->busy = true;
    in->step_start = c->now;
    in->step_end = c->now + k->ns;
    in->steps++;
    push_step_done(c, in);
}

// Starts a step if the instance can; every change of an instance's load ends here (admission,
// step ends, arrivals in its queues), so its router index is brought up to date here.
void sim_inst_kick(sim_cluster *c, sim_inst *in) {
    if (in->busy && in->run_m > 1 && (in->dwait.n || in->ready.n)) {
        // a request for this instance: the run ends at the first step end not before now
        uint32_t j = sim_run_passed(in, c->now);
        if (j + 1 < in->run_m || in->run_more) {
            // the steps cut off were costed but never run
            c->m.steps -= in->run_m - (j + 1);
            for (uint32_t i = j + 1; in->run_ext_any && i < in->run_m; i++) {
                if (in->run_ext[i] & 1) c->m.extrapolated_steps--;
                if (in->run_ext[i] & 2) c->m.table_fallbacks--;
            }
            in->run_m = j + 1;
            // the cut run's end is a new event, as costed whole; the one difference: a run cut
            // before its last page leaves no lower bound at the end it would have had (its
            // whole end was never costed; sim_queue_slot_cancel's ghost), which decides
            // something only if an instance is kicked at that very nanosecond or the queue idles
            // before it (scripts/parity.sh found it in none of its cases, nor with no ghosts)
            in->run_more = 0;
            in->run_seq = 0;
            // run_hint stays: costed as far again, the next run more often ends where a member
            // finishes or the next request arrives than at its costed end, an event of its own
            // (the no-cache hour at 36,000 requests: 560.5 M -> 542.6 M instructions in the
            // loop, where twice as far as this one got cost fewer steps and more events)
            sim_queue_slot_cancel(c->q, in->id);
            in->step_end = in->run_end[j];
            push_step_done(c, in);
        }
    }
    sim_time next;
    if (!in->busy && !in->kick_pending && c->status == KVF_OK && sim_queue_peek_time(c->q, &next) &&
        next <= c->now) {
        // an idle instance forms its step once everything due at this instant has happened:
        // requests arriving (or transfers ending) at the same time share the step, as a
        // serving loop batches all that is queued when it forms one
        in->kick_pending = true;
        sim_event ev = {.t = c->now, .dst = in->id, .kind = SIM_EV_KICK};
        sim_queue_push_last(c->q, &ev);
    } else if (!in->kick_pending) {
        sim_inst_form_step(c, in);
    }
    sim_router_touch(c, in);
    if (!in->active || in->draining) sim_inst_drain_check(c, in);
}

void sim_inst_kicked(sim_cluster *c, sim_inst *in) {
    KVF_ASSERT(in->kick_pending);
    in->kick_pending = false;
    if (in->failed) return;   // it failed since: its queues are gone
    sim_inst_form_step(c, in);
    sim_router_touch(c, in);
    if (!in->active || in->draining) sim_inst_drain_check(c, in);
}

void sim_inst_drain_check(sim_cluster *c, sim_inst *in) {
    // a prefill instance holds its prompts' KV until decode has it (kv_inflight): its last
    // step ends before its last transfer does, and its GPUs are held until then
    bool serving =
        !in->active && !in->failed &&
        (in->busy || in->kick_pending || in->waiting_loads || in->ready.n || in->dwait.n ||
         in->n_running || in->n_prefilling || in->n_loading || in->kv_inflight > 0);
    if (serving == in->draining) return;
    sim_pool_gpu_account(c);   // the time so far at the old count
    sim_pool *p = sim_pool_of(c, in);
    in->draining = serving;
    if (serving)
        p->n_draining++;
    else
        p->n_draining--;
}

// CUDA-graph capture sizes (serving.graph_buckets): 1, 2, 4, then steps of 8 up to the largest.
static uint32_t graph_bucket(uint32_t n, uint32_t largest) {
    if (n > largest) return n;
    uint32_t b = n <= 1 ? 1 : n <= 2 ? 2 : n <= 4 ? 4 : (n + 7) / 8 * 8;
    return b > largest ? n : b;
}

// A decode step runs the graph of the next capture size: the padding sequences cost their
// GEMM rows but attend to nothing (context 0). Summed sequences pad the sums, listed ones the
// list. Returns the listed count.
static uint32_t graph_pad(sim_cluster *c, sim_inst *in, mdl_decode_sum *ds, uint32_t listed) {
    uint32_t gb = c->cfg->serving.graph_buckets;
    if (!gb) return listed;
    uint32_t tot = listed + ds->n, pad = graph_bucket(tot, gb) - tot;
    if (!pad) return listed;
    if (in->dsum_on && ds->n) {
        ds->n += pad;
        return listed;
    }
    sim_seqs_reserve(c, listed + pad);
    for (uint32_t i = 0; i < pad; i++)
        c->seqs[listed + i] = (mdl_seq){1, 0};
    return listed + pad;
}

// DSpark: the verify graph of the next capture size, padding sequences (a block of GEMM rows,
// no context) inserted after the nv verifying ones, before the n - nv others. Returns the
// padded verify count (the list grows by as many).
static uint32_t graph_pad_verify(sim_cluster *c, uint32_t nv, uint32_t n) {
    uint32_t gb = c->cfg->serving.graph_buckets;
    if (!gb) return nv;
    uint32_t pad = graph_bucket(nv, gb) - nv;
    if (!pad) return nv;
    sim_seqs_reserve(c, n + pad);
    memmove(c->seqs + nv + pad, c->seqs + nv, (n - nv) * sizeof *c->seqs);
    for (uint32_t i = 0; i < pad; i++)
        c->seqs[nv + i] = (mdl_seq){c->spec_seq_tokens, 0};
    return nv + pad;
}

// Steps [j0, j0 + cnt) of the run in flight costed in one call where the step model has the
// path (mdl_stepper_cost_run_ends), the step being formed first when j0 is 0: what costing them one
// by one gives (sim_step_cost with the same padding, serving overhead and structured-output
// mask; one step model evaluation for the page, not two), test_sim checks it on real traces.
// Step j costs the sums at d->k + j (the run settles them only at its end), so a run costed
// in pages costs every step as one call for the whole run would: the step model's step j of
// d0 + j * grow, integers exact in doubles either way. The ends land in run_end[j0 ..]. False
// where the step model has no such path (the caller costs the steps one by one). formed: the
// sums of the step being formed (j0 0), padded, as sim_step_form_batch has them already.
static bool run_cost_page(sim_cluster *c, sim_inst *in, sim_pool *p, uint32_t j0, uint32_t cnt,
                          const mdl_decode_sum *formed) {
    const sim_dsum *d = &in->ds;
    if (c->cfg->moe.skew_sd > 0 && c->model.experts) return false;   // a draw per step
    mdl_decode_sum d0, grow = {.sum_ctx = d->n};
    for (uint32_t i = 0; i < d->ncaps; i++)
        grow.sum_min[d->cap_at[i]] = d->n_below[d->cap_at[i]];
    if (formed) {
        d0 = *formed;
    } else {
        d0 = sim_dsum_batch(d);
        d0.sum_ctx += (double)j0 * grow.sum_ctx;
        for (int j = 0; j < MDL_CAPS; j++)
            d0.sum_min[j] += (double)j0 * grow.sum_min[j];
        graph_pad(c, in, &d0, 0);
    }
    // what step_cost adds to every step (the same sequence count throughout)
    int64_t add = serving_step_ns(c, (double)d0.n);
    sim_time mask =
        in->n_structured ? (sim_time)(in->n_structured * c->cfg->decoding.structured_mask_ns) : 0;
    // add >= 0 (the serving keys are range-checked) and every ns >= 1, so no step needs
    // step_cost's clamp to 1 ns and only the longest the bound's check
    KVF_ASSERT(add >= 0);
    mdl_run_ends e = {.t0 = j0 ? in->run_end[j0 - 1] : c->now, .add = add + mask};
    if (!mdl_stepper_cost_run_ends(p->stepper, &d0, &grow, cnt, &e, in->run_end + j0)) return false;
    if (j0) {   // the run's steps never decrease so far where the page's first is not below
        int64_t first = in->run_end[j0] - e.t0 - e.add;
        in->run_rising = in->run_rising && first >= in->run_hi && e.rising;
        in->run_hi = KVF_MAX(in->run_hi, e.hi);
    } else {
        in->run_rising = e.rising;
        in->run_hi = e.hi;
    }
    if (in->run_hi + add > (int64_t)MDL_MAX_STEP_NS) step_too_long(c);
    in->run_ext_any = 0;   // the run path neither extrapolates nor falls back
    c->m.steps += cnt;
    return true;
}

// The early event at the end of a run's costed steps: the next page costed (three times as
// many steps as are costed, SIM_RUN_PAGE first), the event moved to its end. Nothing another
// handler reads changes (sim_queue_slot_push_early): the run is the one costed whole.
static void run_extend(sim_cluster *c, sim_inst *in) {
    uint32_t j0 = in->run_m, cnt = KVF_MIN(in->run_more, 3 * j0);
    bool ok = run_cost_page(c, in, sim_pool_of(c, in), j0, cnt, NULL);
    KVF_ASSERT(ok);   // the step model costed the run's first page the same way
    (void)ok;
    in->run_m += cnt;
    in->run_more -= cnt;
    in->step_end = in->run_end[in->run_m - 1];
    push_step_done(c, in);
}

void sim_inst_form_step(sim_cluster *c, sim_inst *in) {
    if (in->busy || c->status != KVF_OK) return;
    in->ops->form_step(c, in);
}

// Forms a step of decode tokens (decode: every running sequence, after admission) and/or
// prefill chunks (prefill: within the token budget the decode tokens leave), costs it, and
// starts it; a decode-only step on an instance keeping sums may become a run of steps.
void sim_step_form_batch(sim_cluster *c, sim_inst *in, bool decode, bool prefill) {
    sim_pool *p = sim_pool_of(c, in);
    mdl_step_cost k;
    uint32_t n = 0;      // sequences listed in c->seqs
    uint32_t ndec = 0;   // decoding sequences, listed or summed
    uint32_t nv = 0;     // DSpark: verifying sequences, listed first
    mdl_phase phase = MDL_PREFILL;
    mdl_decode_sum ds = {0};
    uint64_t tokens = 0;
    if (decode) {
        sim_decode_admit(c, in);
        sim_tier_fit_free(c, in);
        if (in->dsum_on) {
            // members as sums; requests rebuilding their KV listed
            sim_seqs_reserve(c, in->ds.n_recomp);
            for (uint32_t i = 0; i < in->ds.n_recomp; i++) {
                c->seqs[i] = (mdl_seq){sim_req_at(c, in->ds.recomp[i])->recompute, 0};
                tokens += c->seqs[i].new_tokens;
            }
            n = in->ds.n_recomp;
            ds = sim_dsum_batch(&in->ds);
            tokens += ds.n;
        } else if (c->dspark) {
            // verifying sequences first (a block each), then those rebuilding their KV
            sim_seqs_reserve(c, in->n_running);
            for (uint32_t i = 0; i < in->n_running; i++) {
                sim_req *r = sim_req_at(c, in->running[i]);
                if (!r->recompute)
                    c->seqs[nv++] = (mdl_seq){c->spec_seq_tokens, sim_req_ctx_tokens(r)};
            }
            n = nv;
            for (uint32_t i = 0; i < in->n_running; i++) {
                sim_req *r = sim_req_at(c, in->running[i]);
                if (r->recompute) c->seqs[n++] = (mdl_seq){r->recompute, 0};
            }
            for (uint32_t i = 0; i < n; i++)
                tokens += c->seqs[i].new_tokens;
        } else {
            sim_seqs_reserve(c, in->n_running);
            for (uint32_t i = 0; i < in->n_running; i++) {
                sim_req *r = sim_req_at(c, in->running[i]);
                c->seqs[i] = r->recompute ? (mdl_seq){r->recompute, 0}
                                          : (mdl_seq){c->spec_seq_tokens, sim_req_ctx_tokens(r)};
                tokens += c->seqs[i].new_tokens;
            }
            n = in->n_running;
        }
        ndec = in->n_running;
        phase = MDL_DECODE;
    }
    in->n_batch = 0;
    if (prefill) {
        int64_t budget = in->pcfg->max_batch_tokens - (int64_t)ndec * c->spec_seq_tokens;
        uint32_t n2 = sim_prefill_take_chunks(c, in, budget > 0 ? budget : 0, n);
        in->n_batch = n2 - n;
        // batch[] holds prefill chunks at [n, n2): shift them to the front
        if (n && in->n_batch) {
            memmove(in->batch, in->batch + n, in->n_batch * sizeof *in->batch);
            memmove(in->chunk, in->chunk + n, in->n_batch * sizeof *in->chunk);
        }
        for (uint32_t i = 0; i < in->n_batch; i++)
            tokens += in->chunk[i];
        if (ndec && in->n_batch)
            phase = MDL_MIXED;
        else if (in->n_batch)
            phase = MDL_PREFILL;
        n = n2;
    }
    if (!ndec && !in->n_batch) return;
    if (phase == MDL_DECODE && nv) {
        uint32_t nv2 = graph_pad_verify(c, nv, n);
        n += nv2 - nv;
        nv = nv2;
    } else if (phase == MDL_DECODE) {
        n = graph_pad(c, in, &ds, n);
    }
    // a decode-only step on an instance keeping sums may be the first of a run of m steps
    uint64_t m = 1;
    if (in->runs_on && phase == MDL_DECODE && !n && ds.n && !in->dwait.n && !in->ready.n) {
        sim_dsum *d = &in->ds;
        m = in->run_hint;
        if (d->fin.n) m = KVF_MIN(m, d->fin.e[0].key - d->k);
        for (uint32_t i = 0; i < d->ncaps; i++) {
            const sim_gheap *h = &d->below[d->cap_at[i]];
            if (h->n) m = KVF_MIN(m, h->e[0].key - d->k);
        }
        double room = in->kv_cap - in->kv_used;   // the step after which KV overflows is the last
        m = room < 0 ? 1 : KVF_MIN(m, (uint64_t)floor(room / ds.n) + 1);
        if (m > 1 && m > in->run_cap) {
            size_t cap = in->run_cap, cap2 = in->run_cap;
            kvf_grow((void **)&in->run_end, &cap, m, sizeof *in->run_end);
            kvf_grow((void **)&in->run_ext, &cap2, m, sizeof *in->run_ext);
            in->run_cap = (uint32_t)cap;
        }
    }
    in->run_m = 0;
    in->run_attr = 0;
    // a run is costed in pages (SIM_RUN_PAGE steps, then three times as many as are costed) unless
    // the tests ask for it whole: most runs are cut by a request a few steps in
    uint32_t page = (uint32_t)m;
    if (m > SIM_RUN_PAGE && !(c->opts && c->opts->run_whole)) page = SIM_RUN_PAGE;
    if (m > 1 && run_cost_page(c, in, p, 0, page, &ds)) {
        k = (mdl_step_cost){0};   // the run costed at once, its first step included
        if (page < m) {
            in->run_more = (uint32_t)m - page;
            in->run_seq = sim_queue_seq_take(c->q, in->dsum_on ? 0 : SIM_QUEUE_PLAIN);
            m = page;
        }
    } else {
        step_cost(c, p, phase, n, nv, 0, &ds, &k);
        if (in->n_structured)
            k.ns += (sim_time)(in->n_structured * c->cfg->decoding.structured_mask_ns);
        if (m > 1) {   // the step model has no run path: the steps one by one
            const sim_dsum *d = &in->ds;
            in->run_rising = false;   // not checked: the gaps are binned one by one
            in->run_end[0] = c->now + k.ns;
            in->run_ext[0] = (uint8_t)(k.extrapolated | k.table_fallback << 1);
            in->run_ext_any = in->run_ext[0];
            for (uint32_t j = 1; j < m; j++) {
                mdl_decode_sum dj = sim_dsum_batch_at(d, d->k + j);
                graph_pad(c, in, &dj, 0);
                mdl_step_cost kj;
                sim_step_cost(c, p, MDL_DECODE, 0, 0, &dj, &kj);
                if (in->n_structured)
                    kj.ns += (sim_time)(in->n_structured * c->cfg->decoding.structured_mask_ns);
                in->run_end[j] = in->run_end[j - 1] + kj.ns;
                in->run_ext[j] = (uint8_t)(kj.extrapolated | kj.table_fallback << 1);
                in->run_ext_any |= in->run_ext[j];
            }
        }
    }
    if (m > 1) {
        in->run_m = (uint32_t)m;
        in->run_told = 0;
        k.ns = in->run_end[m - 1] - c->now;
    }
    sim_step_begin(c, in, &k, ndec + in->n_batch, tokens);
}

void sim_inst_step_done(sim_cluster *c, sim_inst *in) {
    if (in->run_more) {   // the end of a page of the run, not of a step that matters yet
        run_extend(c, in);
        return;
    }
    // an overlapped load that is still running holds the step (its layers wait for the KV);
    // none can be where no load was ever sent
    for (uint32_t i = 0; c->tier_loads && i < in->n_batch; i++)
        if (sim_req_at(c, in->batch[i])->pending_loads) {
            in->waiting_loads = true;
            return;
        }
    in->waiting_loads = false;
    // the requests the next batch takes first: their slots were last touched at arrival and
    // are seldom still cached; fetched while the step is settled
    for (size_t i = 0; i < in->ready.n && i < 3; i++) {
        const char *p = (const char *)sim_req_at(c, in->ready.slot[i]);
        for (size_t o = 0; o < sizeof(sim_req); o += 64)
            __builtin_prefetch(p + o);
    }
    in->busy = false;
    in->busy_ns += (double)(c->now - in->step_start);
    in->ops->step_done(c, in);
    sim_inst_kick(c, in);
}

// The end of a step formed by sim_step_form_batch: decode tokens first (requests that were
// running when the step began), then the prefill chunks; with decode, preemption until the
// KV held fits.
void sim_step_settle_batch(sim_cluster *c, sim_inst *in, bool decode) {
    if (decode) {
        c->m.decode_steps++;
        if (in->dsum_on) {
            if (in->run_m > 1) {
                // a run that went as far as it was costed: the next may go twice as far
                if (in->run_m == in->run_hint)
                    in->run_hint = KVF_MIN(SIM_RUN_MAX, 2 * in->run_hint);
                sim_dsum_run_settle(c, in, in->run_m - 1);
                in->run_m = 0;
            }
            sim_dsum_step_done(c, in);
        } else {
            for (uint32_t i = 0; i < in->n_running;)
                if (!sim_decode_emit(c, in, i)) i++;
        }
    }
    for (uint32_t i = 0; i < in->n_batch; i++) {
        const sim_req *r = sim_req_at(c, in->batch[i]);
        sim_tier_prefetch_write(c, in, r,
                                (r->input - r->compute_tokens + r->computed + in->chunk[i]) /
                                    c->cfg->kv.block_tokens);
    }
    for (uint32_t i = 0; i < in->n_batch; i++) {
        uint32_t slot = in->batch[i];
        sim_req *r = sim_req_at(c, slot);
        r->in_batch = false;
        r->computed += in->chunk[i];
        in->queued_tokens -= in->chunk[i];
        // the request's estimated work drains in proportion to its computed tokens
        double done_s = r->compute_tokens ? r->work_s * in->chunk[i] / r->compute_tokens : 0;
        in->queued_work_s -= done_s;
        if (in->queued_work_s < 0) in->queued_work_s = 0;
        // prompt tokens whose KV exists: the hit prefix (minus replayed tokens) + computed
        sim_tier_write_blocks(
            c, in, r, (r->input - r->compute_tokens + r->computed) / c->cfg->kv.block_tokens);
        if (r->abandoned && r->computed < r->compute_tokens)
            sim_prefill_abort(c, in, slot);
        else if (r->computed >= r->compute_tokens)
            sim_prefill_finish(c, in, slot);
        else {
            sim_rheap_push(&in->ready, sim_queue_key(c, in->pcfg, r), slot);
            if (r->pkv) in->n_held_ready++;
        }
    }
    in->n_batch = 0;
    if (decode) sim_decode_preempt(c, in);
    sim_tier_fit_free(c, in);
}
