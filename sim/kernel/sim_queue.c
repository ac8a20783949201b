// sim/sim_queue.c -- 4-ary min-heap of events by value, ordered by (t, seq), with lazy
// cancellation through an open-addressing set of cancelled seqs (linear probing, tombstones
// avoided by rebuilding when the load gets high); beside it, optional slots holding one event
// each in a tournament tree (sim_queue_slots). See sim_queue.h for the contract.
#include "sim_queue.h"

#include <stdlib.h>
#include <string.h>

struct sim_queue {
    sim_event *heap;   // heap[0..n) is a 4-ary min-heap
    size_t n, cap;
    uint64_t next_seq;   // starts at SEQ_BASE: below it, early slot events (slot + 1); 0 marks
                         // an empty cancel slot
    uint64_t early;      // early events popped
    uint64_t *cancel;    // open-addressing set of cancelled seqs, 0 = empty
    size_t ncancel, cancel_cap;   // cancel_cap is a power of two
    uint64_t popped;
    // slots: sev[i] is slot i's pending event; the tournament tree keeps keys by node (1 is
    // the root, lsize + i slot i's leaf, an empty one (INT64_MAX, SLOT_EMPTY)) and wi[k], the
    // slot whose key node k holds. popped: a slot popped but still in the tree (its clearing
    // waits: the handler usually sets the same slot again, one walk up the tree instead of two)
    sim_event *sev;
    struct slot_key {
        sim_time t;
        uint64_t seq;
    } * key;
    uint32_t *wi;
    uint32_t nslot, lsize, live_slots, popped_slot;
    // cancelled slot events' keys, a binary min-heap: a peek sees each until a pop passes it,
    // as it would see the event cancelled in the heap (sim_queue_peek_time's lower bound, which
    // callers act on, is the same with slots as without)
    struct slot_key *ghost;
    size_t nghost, ghost_cap;
};

#define SEQ_BASE (UINT64_C(1) << 32)
#define SLOT_EMPTY UINT64_MAX   // never a real seq: flags use bits 61 and 62 only
#define NO_SLOT UINT32_MAX

static inline bool ev_less(const sim_event *a, const sim_event *b) {
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

sim_queue *sim_queue_create(size_t cap) {
    sim_queue *q = kvf_calloc(1, sizeof *q);
    q->cap = cap < 16 ? 16 : cap;
    q->heap = kvf_malloc(q->cap * sizeof *q->heap);
    q->next_seq = SEQ_BASE;
    q->popped_slot = NO_SLOT;
    q->cancel_cap = 64;
    q->cancel = kvf_calloc(q->cancel_cap, sizeof *q->cancel);
    return q;
}

void sim_queue_destroy(sim_queue *q) {
    if (!q) return;
    free(q->sev);
    free(q->key);
    free(q->wi);
    free(q->ghost);
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

// ---- slots ---------------------------------------------------------------------------------
void sim_queue_slots(sim_queue *q, uint32_t n) {
    KVF_ASSERT(!q->sev && n > 0 && n < UINT32_MAX / 4);
    q->nslot = n;
    q->lsize = 2;
    while (q->lsize < n)
        q->lsize *= 2;
    q->sev = kvf_calloc(n, sizeof *q->sev);
    for (uint32_t i = 0; i < n; i++)
        q->sev[i].seq = SLOT_EMPTY;
    q->key = kvf_malloc(2 * (size_t)q->lsize * sizeof *q->key);
    q->wi = kvf_malloc(2 * (size_t)q->lsize * sizeof *q->wi);
    for (uint32_t k = 0; k < 2 * q->lsize; k++) {
        q->key[k] = (struct slot_key){INT64_MAX, SLOT_EMPTY};
        q->wi[k] = k >= q->lsize ? k - q->lsize : 0;   // padding leaves are never set
    }
    q->popped_slot = NO_SLOT;
}

static inline bool key_less(const struct slot_key *a, const struct slot_key *b) {
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

// Slot i's key changed: the nodes on its path up, while a node's key changes (keys are unique
// but for the empty one, so an unchanged node leaves everything above it as it was; which slot
// an empty node names is never read: the root is read only while a slot is live).
static void slot_set(sim_queue *q, uint32_t i, sim_time t, uint64_t seq) {
    struct slot_key *key = q->key;
    uint32_t *wi = q->wi;
    uint32_t k = q->lsize + i;
    key[k] = (struct slot_key){t, seq};
    for (k /= 2; k >= 1; k /= 2) {
        uint32_t l = 2 * k, w = key_less(&key[l + 1], &key[l]) ? l + 1 : l;
        if (key[w].t == key[k].t && key[w].seq == key[k].seq) break;
        key[k] = key[w];
        wi[k] = wi[w];
    }
}

// Clears the slot a pop left in the tree, unless it is about to be set again.
static inline void settle_popped(sim_queue *q) {
    if (q->popped_slot == NO_SLOT) return;
    slot_set(q, q->popped_slot, INT64_MAX, SLOT_EMPTY);
    q->popped_slot = NO_SLOT;
}

uint64_t sim_queue_seq_take(sim_queue *q, uint64_t flags) {
    KVF_ASSERT(flags == 0 || flags == SIM_QUEUE_PLAIN);
    return flags | q->next_seq++;
}

// Slot i takes *ev with this seq.
static void slot_take(sim_queue *q, uint32_t slot, const sim_event *ev, uint64_t seq) {
    KVF_ASSERT(slot < q->nslot && q->sev[slot].seq == SLOT_EMPTY);
    if (q->popped_slot != slot) settle_popped(q);
    q->popped_slot = NO_SLOT;
    q->sev[slot] = *ev;
    q->sev[slot].seq = seq;
    q->live_slots++;
    slot_set(q, slot, ev->t, seq);
}

void sim_queue_slot_push_seq(sim_queue *q, uint32_t slot, const sim_event *ev, uint64_t seq) {
    uint64_t n = seq & ~SIM_QUEUE_PLAIN;
    KVF_ASSERT(n >= SEQ_BASE && n < q->next_seq && !(seq & SIM_QUEUE_LAST));
    slot_take(q, slot, ev, seq);
}

uint64_t sim_queue_slot_push(sim_queue *q, uint32_t slot, const sim_event *ev, bool first) {
    uint64_t seq = (first ? 0 : SIM_QUEUE_PLAIN) | q->next_seq++;
    slot_take(q, slot, ev, seq);
    return seq;
}

void sim_queue_slot_push_early(sim_queue *q, uint32_t slot, const sim_event *ev) {
    slot_take(q, slot, ev, (uint64_t)slot + 1);
}

uint64_t sim_queue_early_popped(const sim_queue *q) {
    return q->early;
}

static void ghost_push(sim_queue *q, struct slot_key k) {
    if (q->nghost == q->ghost_cap)
        kvf_grow((void **)&q->ghost, &q->ghost_cap, q->nghost + 1, sizeof *q->ghost);
    size_t i = q->nghost++;
    for (; i > 0 && key_less(&k, &q->ghost[(i - 1) / 2]); i = (i - 1) / 2)
        q->ghost[i] = q->ghost[(i - 1) / 2];
    q->ghost[i] = k;
}

static void ghost_pop(sim_queue *q) {
    struct slot_key k = q->ghost[--q->nghost];
    size_t i = 0, n = q->nghost;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && key_less(&q->ghost[c + 1], &q->ghost[c])) c++;
        if (!key_less(&q->ghost[c], &k)) break;
        q->ghost[i] = q->ghost[c];
        i = c;
    }
    if (n) q->ghost[i] = k;
}

// Drops the cancelled slot events a pop of key (t, seq) passes (all when nothing is left).
static void ghosts_passed(sim_queue *q, sim_time t, uint64_t seq) {
    struct slot_key k = {t, seq};
    while (q->nghost && key_less(&q->ghost[0], &k))
        ghost_pop(q);
}

void sim_queue_slot_cancel(sim_queue *q, uint32_t slot) {
    KVF_ASSERT(slot < q->nslot && q->sev[slot].seq != SLOT_EMPTY);
    settle_popped(q);
    if (q->sev[slot].seq >= SEQ_BASE)   // an early event is no event: no lower bound
        ghost_push(q, (struct slot_key){q->sev[slot].t, q->sev[slot].seq});
    q->sev[slot].seq = SLOT_EMPTY;
    q->live_slots--;
    slot_set(q, slot, INT64_MAX, SLOT_EMPTY);
}

bool sim_queue_pop(sim_queue *q, sim_event *out) {
    settle_popped(q);
    for (;;) {
        // the slots' least against the heap's top: one order over both (seqs are unique)
        const sim_event *s = q->live_slots ? &q->sev[q->wi[1]] : NULL;
        if (q->n && (!s || ev_less(&q->heap[0], s))) {
            *out = q->heap[0];
            q->n--;
            if (q->n) {
                q->heap[0] = q->heap[q->n];
                sift_down(q->heap, q->n, 0);
            }
            if (cancel_take(q, out->seq)) continue;
        } else if (s) {
            *out = *s;
            q->popped_slot = q->wi[1];
            q->sev[q->popped_slot].seq = SLOT_EMPTY;
            q->live_slots--;
        } else {
            q->nghost = 0;   // the queue is empty: every cancelled event is passed
            return false;
        }
        if (q->nghost) ghosts_passed(q, out->t, out->seq);
        if (out->seq < SEQ_BASE)
            q->early++;
        else
            q->popped++;
        return true;
    }
}

size_t sim_queue_size(const sim_queue *q) {
    return q->n - q->ncancel + q->live_slots;
}

uint64_t sim_queue_popped(const sim_queue *q) {
    return q->popped;
}

bool sim_queue_peek_time(const sim_queue *q, sim_time *t) {
    if (!q->n && !q->live_slots && !q->nghost) return false;
    // the heap's top may be a cancelled event: never later than the next live one; a popped
    // slot still in the tree (not yet cleared) is passed over
    sim_time h = q->n ? q->heap[0].t : INT64_MAX, sl = INT64_MAX;
    if (q->nghost && q->ghost[0].t < h) h = q->ghost[0].t;
    if (q->live_slots) {
        if (q->popped_slot == NO_SLOT)
            sl = q->key[1].t;
        else   // the path of the popped slot is stale; its siblings hold every other slot
            for (uint32_t k = q->lsize + q->popped_slot; k > 1; k /= 2)
                if (q->key[k ^ 1].t < sl) sl = q->key[k ^ 1].t;
    }
    *t = h < sl ? h : sl;
    return true;
}
