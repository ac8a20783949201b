// sim/sim_queue.h -- pending events ordered by (time, seq). seq is given at push, so events
// at equal times pop in the order they were scheduled (first, plain and last events apart, in
// that order); runs are deterministic.
//
// Storage is one growable array holding a 4-ary min-heap of events by value: no malloc per
// event (the array only grows, doubling, and is reused). Cancellation is lazy: a cancelled
// seq is remembered in a small open-addressing set and its event is dropped when it reaches
// the top of the heap. Slots (below) hold one event each outside the heap.
#ifndef SIM_QUEUE_H
#define SIM_QUEUE_H

#include "kvf.h"

typedef int64_t sim_time;   // simulated nanoseconds

typedef struct sim_event {
    sim_time t;      // fire time
    uint64_t seq;    // push order, breaks ties (set by sim_queue_push)
    uint32_t dst;    // receiving entity id
    uint16_t kind;   // SIM_EV_*
    uint16_t pad;
    uint64_t arg[2];   // payload, meaning set by kind
} sim_event;

typedef struct sim_queue sim_queue;   // opaque: 4-ary heap + cancel set

// Creates a queue with room for cap events (grows as needed). Never NULL (aborts on OOM).
sim_queue *sim_queue_create(size_t cap);
void sim_queue_destroy(sim_queue *q);
// Copies *ev with a fresh seq; returns that seq (a handle for sim_queue_cancel).
uint64_t sim_queue_push(sim_queue *q, const sim_event *ev);
// As sim_queue_push, but the event pops after every event of its time pushed by plain
// sim_queue_push, before or after it (its seq carries SIM_QUEUE_LAST); among themselves such
// events keep their push order. For what must see everything that happens at its instant.
// sim_queue_push_first: the event pops before every plain and last event of its time, pushed
// before or after it (a plain event's seq carries SIM_QUEUE_PLAIN, a first one's no flag);
// among themselves first events keep their push order. For what everything else at its
// instant must see as done.
#define SIM_QUEUE_LAST (UINT64_C(1) << 62)
#define SIM_QUEUE_PLAIN (UINT64_C(1) << 61)
uint64_t sim_queue_push_last(sim_queue *q, const sim_event *ev);
uint64_t sim_queue_push_first(sim_queue *q, const sim_event *ev);
// Slots: where an entity has at most one pending event at a time (an instance's step end),
// that event can live in its slot instead of the heap: a tournament tree over the slots, so
// setting or cancelling it is one walk up the tree and a cancelled one is never popped.
// sim_queue_slots gives the queue n slots (once, before any slot push); a slot event takes
// its seq from the same count as every push (sim_queue_slot_push: first as with
// sim_queue_push_first, else plain), and pops in the one (t, seq) order with the heap's.
// Pushing to a slot that holds an event, or cancelling an empty one, is a bug (asserted).
void sim_queue_slots(sim_queue *q, uint32_t n);
uint64_t sim_queue_slot_push(sim_queue *q, uint32_t slot, const sim_event *ev, bool first);
void sim_queue_slot_cancel(sim_queue *q, uint32_t slot);
// Held events, for what is costed in parts ahead of time (a run of decode steps costed page
// by page): sim_queue_seq_take gives out the seq a push with these flags would have taken
// (0: first, else SIM_QUEUE_PLAIN), so the pushes after it number as if it had been pushed;
// sim_queue_slot_push_seq pushes a slot event with such a seq, taken earlier and not used
// since. sim_queue_slot_push_early pushes a slot event that pops before every other of its
// time (its seq is below every seq given out; push it for a time after the pushing handler's)
// and is none of the simulation's events: it is not counted by sim_queue_popped
// (sim_queue_early_popped counts it) and, cancelled, leaves no lower bound for
// sim_queue_peek_time. Its handler must change nothing another event's
// handler reads but the queue's slot it sets again; then every other event pops as it would
// without it (the same order and seqs), and a peek made by another event's handler finds an
// event due at or before that handler's time exactly when it would without it (an early event
// of that time has popped already; one later is later than that time either way). The peeked
// time itself may be an early event's.
uint64_t sim_queue_seq_take(sim_queue *q, uint64_t flags);
void sim_queue_slot_push_seq(sim_queue *q, uint32_t slot, const sim_event *ev, uint64_t seq);
void sim_queue_slot_push_early(sim_queue *q, uint32_t slot, const sim_event *ev);
uint64_t sim_queue_early_popped(const sim_queue *q);
// Pops the earliest live event into *out; false when none is left.
bool sim_queue_pop(sim_queue *q, sim_event *out);
// Marks the event with this seq as cancelled; it will never be returned by pop.
// Cancelling an event that already fired is a bug the caller must avoid.
void sim_queue_cancel(sim_queue *q, uint64_t seq);
// Live events still pending (pushed, not popped, not cancelled).
size_t sim_queue_size(const sim_queue *q);
// Events popped so far (live ones only).
uint64_t sim_queue_popped(const sim_queue *q);
// A lower bound on the time of the next live event (the heap top, cancelled or not); false
// when the queue is empty.
bool sim_queue_peek_time(const sim_queue *q, sim_time *t);

#endif
