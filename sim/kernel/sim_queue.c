// sim/sim_queue.c -- 4-ary min-heap of events by value, ordered by (t, seq), with lazy
// cancellation through an open-addressing set of cancelled seqs (linear probing, tombstones
// avoided by rebuilding when the load gets high). See sim_queue.h for the contract.
#include "sim_queue.h"

#include <stdlib.h>
#include <string.h>

struct sim_queue {
    sim_event *heap;   // heap[0..n) is a 4-ary min-heap
    size_t n, cap;
    uint64_t next_seq;            // starts at 1; 0 marks an empty cancel slot
    uint64_t *cancel;             // open-addressing set of cancelled seqs, 0 = empty
    size_t ncancel, cancel_cap;   // cancel_cap is a power of two
    uint64_t popped;
};

static inline bool ev_less(const sim_event *a, const sim_event *b) {
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

sim_queue *sim_queue_create(size_t cap) {
    sim_queue *q = kvf_calloc(1, sizeof *q);
    q->cap = cap < 16 ? 16 : cap;
    q->heap = kvf_malloc(q->cap * sizeof *q->heap);
    q->next_seq = 1;
    q->cancel_cap = 64;
    q->cancel = kvf_calloc(q->cancel_cap, sizeof *q->cancel);
    return q;
}

void sim_queue_destroy(sim_queue *q) {
    if (!q) return;
    free(q->heap);
    free(q->cancel);
    free(q);
}

static void sift_up(sim_event *h, size_t i) {
    sim_event ev = h[i];
    while (i > 0) {
        size_t p = (i - 1) / 4;
        if (!ev_less(&ev, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = ev;
}

static void sift_down(sim_event *h, size_t n, size_t i) {
    sim_event ev = h[i];
    for (;;) {
        size_t c = 4 * i + 1;
        if (c >= n) break;
        size_t best = c, end = c + 4 < n ? c + 4 : n;
        for (size_t k = c + 1; k < end; k++)
            if (ev_less(&h[k], &h[best])) best = k;
        if (!ev_less(&h[best], &ev)) break;
        h[i] = h[best];
        i = best;
    }
    h[i] = ev;
}

// Pushes *ev with the next seq, or-ed with flags (0, SIM_QUEUE_PLAIN or SIM_QUEUE_LAST);
// returns the seq.
static uint64_t push(sim_queue *q, const sim_event *ev, uint64_t flags) {
    if (q->n == q->cap) kvf_grow((void **)&q->heap, &q->cap, q->n + 1, sizeof *q->heap);
    uint64_t seq = flags | q->next_seq++;
    q->heap[q->n] = *ev;
    q->heap[q->n].seq = seq;
    sift_up(q->heap, q->n);
    q->n++;
    return seq;
}

uint64_t sim_queue_push(sim_queue *q, const sim_event *ev) {
    return push(q, ev, SIM_QUEUE_PLAIN);
}

uint64_t sim_queue_push_first(sim_queue *q, const sim_event *ev) {
    return push(q, ev, 0);
}

uint64_t sim_queue_push_last(sim_queue *q, const sim_event *ev) {
    return push(q, ev, SIM_QUEUE_LAST);
}

static size_t cancel_slot(const sim_queue *q, uint64_t seq) {
    size_t mask = q->cancel_cap - 1, i = (size_t)kvf_hash64(seq) & mask;
    while (q->cancel[i] && q->cancel[i] != seq)
        i = (i + 1) & mask;
    return i;
}

// Removes seq from the cancel set (backward-shift deletion keeps probing chains intact).
static bool cancel_take(sim_queue *q, uint64_t seq) {
    if (!q->ncancel) return false;
    size_t mask = q->cancel_cap - 1, i = cancel_slot(q, seq);
    if (!q->cancel[i]) return false;
    q->cancel[i] = 0;
    q->ncancel--;
    for (size_t j = (i + 1) & mask; q->cancel[j]; j = (j + 1) & mask) {
        uint64_t s = q->cancel[j];
        q->cancel[j] = 0;
        q->cancel[cancel_slot(q, s)] = s;
    }
    return true;
}

void sim_queue_cancel(sim_queue *q, uint64_t seq) {
    uint64_t n = seq & ~(SIM_QUEUE_LAST | SIM_QUEUE_PLAIN);
    KVF_ASSERT(n > 0 && n < q->next_seq);
    if ((q->ncancel + 1) * 2 > q->cancel_cap) {
        uint64_t *old = q->cancel;
        size_t oldcap = q->cancel_cap;
        q->cancel_cap *= 2;
        q->cancel = kvf_calloc(q->cancel_cap, sizeof *q->cancel);
        for (size_t i = 0; i < oldcap; i++)
            if (old[i]) q->cancel[cancel_slot(q, old[i])] = old[i];
        free(old);
    }
    size_t i = cancel_slot(q, seq);
    if (!q->cancel[i]) {
        q->cancel[i] = seq;
        q->ncancel++;
    }
}

bool sim_queue_pop(sim_queue *q, sim_event *out) {
    while (q->n) {
        *out = q->heap[0];
        q->n--;
        if (q->n) {
            q->heap[0] = q->heap[q->n];
            sift_down(q->heap, q->n, 0);
        }
        if (cancel_take(q, out->seq)) continue;
        q->popped++;
        return true;
    }
    return false;
}

size_t sim_queue_size(const sim_queue *q) {
    return q->n - q->ncancel;
}

uint64_t sim_queue_popped(const sim_queue *q) {
    return q->popped;
}

bool sim_queue_peek_time(const sim_queue *q, sim_time *t) {
    if (!q->n) return false;
    *t = q->heap[0].t;   // may be a cancelled event: never later than the next live one
    return true;
}
