// traces/trc_gen.c -- the synthetic traffic generator, a trace source like the file readers.
//
// Arrivals come from one process (Poisson, Gamma with a given CV, or a diurnal Poisson by
// thinning). Each arrival starts a new session with probability 1/mean_turns, otherwise
// continues a random open session (at most POOL open; opening one more retires the oldest).
// A session is an append-only token stream: system prompt, user/tool text, answers. Turn k's
// prompt is everything so far plus new tokens, so block i of the stream has one id for the
// session's life: ids chain (id_i = combine(id_{i-1}, content_i)), content_i is the class's
// system prompt for blocks wholly inside it (shared by every session of the class) and the
// session's own text otherwise.
//
// Days mode (options.days > 0, trc.h) replaces the session pool by an event list: each
// session's next turn or return is a timed event, new sessions come from a thinned Poisson
// process shaped by the day and the week, and a session's block ids are recomputed from its
// (uid, conversation, length) when it is emitted, so a session waiting days for its return
// costs a few dozen bytes. Its parameters and their sources are listed at days_defaults below.
//
// Random streams (seed, k): 1 arrivals, 2 sessions and lengths, 3 days mode's visits and
// returns; runs are pure functions of the options.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trc_int.h"

#define POOL 64

typedef struct prof {
    uint32_t sys_tokens;
    double mean_turns;
    double first_med, first_sigma;   // new tokens on the first turn (lognormal)
    double next_med, next_sigma;     // new tokens on later turns (user text or tool output)
    double out_med, out_sigma;       // answer tokens
} prof;

static const prof profiles[3] = {
    [TRC_GEN_CHATBOT] = {800, 3, 300, 1.0, 200, 1.0, 250, 0.9},
    [TRC_GEN_AGENT] = {6000, 12, 500, 0.8, 900, 1.2, 150, 0.8},
    [TRC_GEN_CODING] = {3000, 6, 8000, 0.9, 400, 1.0, 500, 0.9},
};
static const uint8_t prof_class[3] = {TRC_CLASS_CHATBOT, TRC_CLASS_AGENT, TRC_CLASS_CODING};

typedef struct gsess {
    bool live;
    uint8_t kind;     // TRC_GEN_CHATBOT..CODING
    uint64_t uid;     // session id (never 0)
    uint32_t turns;   // turns so far
    uint32_t len;     // tokens of the stream so far (last prompt + last answer)
    uint32_t sys;     // system prompt tokens
    uint64_t *ids;    // chained ids of full blocks of the stream
    size_t nids, capids;
    int64_t last_key;   // key of the session's previous turn (closed loop), -1 = none
} gsess;

// Days mode: one session (a user's conversation and its later visits).
typedef struct dsess {
    uint64_t uid;       // session id (never 0)
    uint32_t len;       // tokens of the conversation so far (last prompt + last answer)
    uint32_t sys;       // system prompt tokens
    uint32_t turns;     // turns so far, all visits
    uint32_t conv;      // conversation number: a context that would overflow starts a new one
    uint32_t left;      // turns left in the current visit
    uint8_t kind;       // TRC_GEN_CHATBOT..CODING
    bool returning;     // its next turn opens a returning visit
    int64_t last_key;   // key of its previous emitted turn, -1 = none
    double think;       // s: gap before its next turn within the visit (closed loop's think)
} dsess;

typedef struct devt {
    double t;       // s
    uint64_t seq;   // tie-break: order of scheduling
    uint32_t s;     // index into ds
} devt;

typedef struct gsrc {
    trc_source base;
    trc_gen_options g;
    kvf_rng arr, ses;
    double t;   // s
    uint64_t n;
    gsess pool[POOL];
    size_t next_slot;
    uint64_t next_uid;
    uint32_t *len_in, *len_out;
    size_t nlens;
    // days mode
    kvf_rng vis;   // stream 3: visit lengths, think gaps, returns
    dsess *ds;     // sessions; free slots listed in dfree
    size_t nds, capds;
    uint32_t *dfree;
    size_t nfree, capfree;
    devt *heap;   // min-heap on (t, seq): next turns and returns
    size_t nh, caph;
    uint64_t seq;
    double next_new;   // s: next new session
    double r_new;      // new sessions per s at rhythm 1
    double rmax;       // maximum of the rhythm
    double horizon;    // s
} gsrc;

// Days mode defaults and where they come from. No public trace gives per-class return times
// of LLM sessions; the figures below are assumptions chosen to be plausible, and a scenario
// should set its own (workload.generate.return.*). What is published is the shape:
// - Daily cycle and weekly dip: the week-long Azure LLM inference traces of 2024 (Stojkovic et
//   al., "DynamoLLM", HPCA 2025; github.com/Azure/AzurePublicDataset, AzureLLMInferenceDataset2024)
//   and 213 days of Azure OpenAI traffic in BurstGPT (Wang et al., arXiv 2401.17644) show
//   request rates that follow the working day and drop at weekends. The amplitude 0.5 (peak
//   three times the trough), the 14:00 peak and the weekend ratio 0.7 are assumptions of that
//   shape, not fitted values.
// - Turns per visit: the profiles above (3 chatbot, 12 agent, 6 coding), unchanged.
// - Returns (p = probability that a visit is followed by another; lognormal median, sigma):
//   chatbot 0.5, 20 h, 1.2: people come back to a conversation about once a day (assumption);
//   agent 0.6, 4 h, 1.5: an agent task resumed after a review within the working day, with a
//     long tail (assumption);
//   coding 0.7, 16 h, 1.0: a repository session resumed the next working day (assumption).
// - warmup_days 7: long enough that returns with these medians have built up by t = 0.
static const trc_gen_return days_ret[3] = {
    [TRC_GEN_CHATBOT] = {0.5, 20, 1.2},
    [TRC_GEN_AGENT] = {0.6, 4, 1.5},
    [TRC_GEN_CODING] = {0.7, 16, 1.0},
};

void trc_gen_options_default(trc_gen_options *g) {
    memset(g, 0, sizeof *g);
    g->profile = TRC_GEN_CHATBOT;
    g->rate_rps = 1;
    g->duration_s = 600;
    g->arrival = TRC_ARRIVAL_POISSON;
    g->cv = 2;
    g->diurnal_amplitude = 0.5;
    g->diurnal_period_s = 86400;
    g->seed = 1;
    g->block_tokens = 64;
    g->system_tokens = -1;
    g->max_context = 131072;
    g->think_s = 5;
    g->peak_hour = 14;
    g->weekend_ratio = 0.7;
    g->warmup_days = 7;
    memcpy(g->ret, days_ret, sizeof g->ret);
}

static const char *prof_names[] = {"chatbot", "agent", "coding", "mixed"};
static const char *arr_names[] = {"poisson", "gamma", "diurnal"};

const char *trc_gen_profile_name(trc_gen_profile p) {
    return (unsigned)p < 4 ? prof_names[p] : "unknown";
}
bool trc_gen_profile_parse(const char *s, trc_gen_profile *out) {
    for (int i = 0; s && i < 4; i++)
        if (!strcmp(s, prof_names[i])) {
            *out = (trc_gen_profile)i;
            return true;
        }
    return false;
}
const char *trc_arrival_name(trc_arrival a) {
    return (unsigned)a < 3 ? arr_names[a] : "unknown";
}
bool trc_arrival_parse(const char *s, trc_arrival *out) {
    for (int i = 0; s && i < 3; i++)
        if (!strcmp(s, arr_names[i])) {
            *out = (trc_arrival)i;
            return true;
        }
    return false;
}

// Shares of new sessions by kind for the mixed profile (mix[] normalised, or the default).
static void mix_shares(const trc_gen_options *g, double w[3]) {
    double s = g->mix[0] + g->mix[1] + g->mix[2];
    for (int k = 0; k < 3; k++)
        w[k] = s > 0 ? g->mix[k] / s : (k == 0 ? 0.5 : k == 1 ? 0.3 : 0.2);
}

static double gen_mean_turns(const gsrc *x) {
    if (x->g.mean_turns > 0) return x->g.mean_turns;
    if (x->g.profile == TRC_GEN_MIXED) {
        double w[3];
        mix_shares(&x->g, w);
        return w[0] * profiles[0].mean_turns + w[1] * profiles[1].mean_turns +
               w[2] * profiles[2].mean_turns;
    }
    return profiles[x->g.profile].mean_turns;
}

static uint32_t draw_len(kvf_rng *r, double med, double sigma, uint32_t cap) {
    double v = floor(kvf_rng_lognormal(r, log(med), sigma) + 0.5);
    if (v < 1) v = 1;
    if (v > cap) v = cap;
    return (uint32_t)v;
}

// New prompt tokens and answer tokens of a turn.
static void draw_turn(gsrc *x, const gsess *s, uint32_t *new_tokens, uint32_t *out_tokens) {
    const prof *p = &profiles[s->kind];
    uint32_t cap = KVF_MAX(1u, x->g.max_context / 2);
    uint32_t in, out;
    if (x->nlens) {
        size_t i = kvf_rng_below(&x->ses, (uint32_t)x->nlens);
        in = KVF_MIN(x->len_in[i], cap);
        out = KVF_MIN(x->len_out[i], cap);
    } else {
        in = s->turns == 0 ? draw_len(&x->ses, p->first_med, p->first_sigma, cap)
                           : draw_len(&x->ses, p->next_med, p->next_sigma, cap);
        out = draw_len(&x->ses, p->out_med, p->out_sigma, cap);
    }
    if (x->g.input_len) in = x->g.input_len;
    if (x->g.output_len) out = x->g.output_len;
    *new_tokens = in;
    *out_tokens = out;
}

// Id of block i of a stream: blocks wholly inside the system prompt carry the class's shared
// content, the others the conversation's own (session uid, conversation number conv; conv 0
// hashes as the uid alone). A block's content, and so everything before it, is fixed by its
// stream and position (a session's system prompt is fixed by its class), so the id is a hash
// of (stream, position): equal ids <=> equal prefixes. Eight consecutive blocks of a stream
// share the id's high 61 bits and differ in the low 3 (the layout trc_block_sub_id gives the
// sub-blocks of a trace block), so the store's index keeps them in one bucket (sim_kv.h).
// prev is unused: ids no longer chain (kept for the callers' shape).
static uint64_t block_id(const gsrc *x, uint64_t prev, uint8_t kind, uint32_t sys, uint64_t uid,
                         uint32_t conv, size_t i) {
    (void)prev;
    uint64_t stream;
    if ((uint64_t)(i + 1) * x->g.block_tokens <= sys)
        stream = kvf_hash_combine(x->g.seed ^ 0x5757ULL, kind);
    else
        stream = kvf_hash_combine(conv ? kvf_hash_combine(uid, conv) : uid, 0x636f6e76ULL);
    uint64_t hi = kvf_hash_combine(kvf_hash_combine(0x6b7666ULL, stream), (uint64_t)(i >> 3));
    return (hi & ~(uint64_t)7) | (uint64_t)(i & 7);
}

// Extends the session's id chain to cover n full blocks.
static void extend_ids(gsrc *x, gsess *s, size_t n) {
    if (n > s->capids) kvf_grow((void **)&s->ids, &s->capids, n, sizeof *s->ids);
    for (size_t i = s->nids; i < n; i++)
        s->ids[i] = block_id(x, i ? s->ids[i - 1] : 0, s->kind, s->sys, s->uid, 0, i);
    if (n > s->nids) s->nids = n;
}

// A new session's class (mixed: 50 % chatbot, 30 % agent, 20 % coding), id and system prompt.
static void draw_session(gsrc *x, uint8_t *kind, uint64_t *uid, uint32_t *sys) {
    if (x->g.profile == TRC_GEN_MIXED) {
        double u = kvf_rng_uniform(&x->ses), w[3];
        mix_shares(&x->g, w);
        *kind = u < w[0] ? TRC_GEN_CHATBOT : u < w[0] + w[1] ? TRC_GEN_AGENT : TRC_GEN_CODING;
    } else
        *kind = (uint8_t)x->g.profile;
    *uid = kvf_hash_combine(x->g.seed, ++x->next_uid);
    if (!*uid) *uid = 1;
    *sys = x->g.system_tokens >= 0 ? (uint32_t)x->g.system_tokens : profiles[*kind].sys_tokens;
}

static gsess *new_session(gsrc *x) {
    gsess *s = &x->pool[x->next_slot++ % POOL];
    s->live = true;
    draw_session(x, &s->kind, &s->uid, &s->sys);
    s->turns = 0;
    s->len = s->sys;
    s->nids = 0;
    s->last_key = -1;
    return s;
}

static double next_gap(gsrc *x) {
    double R = x->g.rate_rps;
    switch (x->g.arrival) {
    case TRC_ARRIVAL_GAMMA: {
        double shape = 1.0 / (x->g.cv * x->g.cv);
        return kvf_rng_gamma(&x->arr, shape, 1.0 / (R * shape));
    }
    case TRC_ARRIVAL_DIURNAL: {
        double A = x->g.diurnal_amplitude, P = x->g.diurnal_period_s, lmax = R * (1 + A);
        double t = x->t;
        for (;;) {
            t += kvf_rng_exp(&x->arr, 1.0 / lmax);
            double l = R * (1 + A * sin(2 * M_PI * t / P));
            if (kvf_rng_uniform(&x->arr) * lmax <= l) return t - x->t;
        }
    }
    default:
        return kvf_rng_exp(&x->arr, 1.0 / R);
    }
}

// ---- days mode ------------------------------------------------------------------------------
enum { DAY_S = 86400 };

// The rate multiplier at time t (s; t = 0 is midnight of weekday start_weekday): the daily
// cosine times the weekday/weekend factor, normalised so its mean over a week is 1.
static double rhythm(const trc_gen_options *g, double t) {
    double day = floor(t / DAY_S), hour = (t - day * DAY_S) / 3600;
    // the weekday in floating point: no integer cast of a day count (t is only bounded by
    // the horizon and the warm-up, but a caller's far-off draw must not overflow a long)
    double wd = fmod(day + g->start_weekday, 7);   // 5, 6 = Saturday, Sunday
    if (wd < 0) wd += 7;
    double week = (wd >= 5 ? g->weekend_ratio : 1.0) * 7 / (5 + 2 * g->weekend_ratio);
    return (1 + g->diurnal_amplitude * cos(2 * M_PI * (hour - g->peak_hour) / 24)) * week;
}

static double rhythm_max(const trc_gen_options *g) {
    return (1 + g->diurnal_amplitude) * KVF_MAX(1.0, g->weekend_ratio) * 7 /
           (5 + 2 * g->weekend_ratio);
}

static double class_turns(const gsrc *x, int kind) {
    return x->g.mean_turns > 0 ? x->g.mean_turns : profiles[kind].mean_turns;
}

// Turns of one visit: geometric on {1, 2, ...} with the class's mean.
static uint32_t visit_turns(gsrc *x, int kind) {
    double m = class_turns(x, kind);
    if (m <= 1) return 1;
    double u = 1 - kvf_rng_uniform(&x->vis);   // (0, 1]
    double k = 1 + floor(log(u) / log(1 - 1 / m));
    return k > 1e6 ? 1000000u : (uint32_t)k;
}

static void heap_push(gsrc *x, double t, uint32_t si) {
    if (x->nh + 1 > x->caph) kvf_grow((void **)&x->heap, &x->caph, x->nh + 1, sizeof *x->heap);
    devt e = {t, x->seq++, si};
    size_t i = x->nh++;
    while (i) {
        size_t up = (i - 1) / 2;
        const devt *p = &x->heap[up];
        if (p->t < e.t || (p->t == e.t && p->seq < e.seq)) break;
        x->heap[i] = *p;
        i = up;
    }
    x->heap[i] = e;
}

static devt heap_pop(gsrc *x) {
    KVF_ASSERT(x->nh > 0);
    devt top = x->heap[0], e = x->heap[--x->nh];
    size_t i = 0, n = x->nh;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && (x->heap[c + 1].t < x->heap[c].t || (x->heap[c + 1].t == x->heap[c].t &&
                                                              x->heap[c + 1].seq < x->heap[c].seq)))
            c++;
        if (e.t < x->heap[c].t || (e.t == x->heap[c].t && e.seq < x->heap[c].seq)) break;
        x->heap[i] = x->heap[c];
        i = c;
    }
    if (n) x->heap[i] = e;
    return top;
}

// Next new-session time after t: Poisson at r_new * rhythm, by thinning.
static double days_next_new(gsrc *x, double t) {
    double lmax = x->r_new * x->rmax;
    for (;;) {
        t += kvf_rng_exp(&x->arr, 1.0 / lmax);
        if (t > x->horizon) return t;   // past the end: no need to thin
        if (kvf_rng_uniform(&x->arr) * x->rmax <= rhythm(&x->g, t)) return t;
    }
}

static uint32_t days_new_session(gsrc *x) {
    uint32_t si;
    if (x->nfree)
        si = x->dfree[--x->nfree];
    else {
        if (x->nds + 1 > x->capds) kvf_grow((void **)&x->ds, &x->capds, x->nds + 1, sizeof *x->ds);
        si = (uint32_t)x->nds++;
    }
    dsess *s = &x->ds[si];
    memset(s, 0, sizeof *s);
    draw_session(x, &s->kind, &s->uid, &s->sys);
    s->len = s->sys;
    s->left = visit_turns(x, s->kind);
    s->last_key = -1;
    return si;
}

// After session si's turn at time t: schedule its next turn, its return, or free it.
static void days_schedule(gsrc *x, uint32_t si, double t) {
    dsess *s = &x->ds[si];
    if (--s->left > 0) {
        s->think = kvf_rng_exp(&x->vis, x->g.think_s);
        heap_push(x, t + s->think, si);
        return;
    }
    const trc_gen_return *r = &x->g.ret[s->kind];
    if (kvf_rng_uniform(&x->vis) < r->p) {
        double tr;
        do   // the class's return time, accepted in proportion to the rhythm at the return
            tr = t + 3600 * kvf_rng_lognormal(&x->vis, log(r->median_h), r->sigma);
        while (kvf_rng_uniform(&x->vis) * x->rmax > rhythm(&x->g, tr));
        if (tr <= x->horizon) {
            s->returning = true;
            s->left = visit_turns(x, s->kind);
            heap_push(x, tr, si);
            return;
        }
    }
    if (x->nfree + 1 > x->capfree)
        kvf_grow((void **)&x->dfree, &x->capfree, x->nfree + 1, sizeof *x->dfree);
    x->dfree[x->nfree++] = si;
}

// Session si's turn at time t; fills rec when emit (t >= 0), else only advances the session.
static void days_turn(gsrc *x, uint32_t si, double t, trc_rec *rec, bool emit) {
    dsess *s = &x->ds[si];
    gsess view = {.kind = s->kind, .turns = s->turns};
    uint32_t add, out;
    draw_turn(x, &view, &add, &out);
    bool first_of_visit = s->returning || s->turns == 0;
    uint8_t flags = s->returning ? TRC_F_RETURN : 0;
    s->returning = false;
    if ((uint64_t)s->len + add > x->g.max_context) {   // a new conversation, same system prompt
        s->conv++;
        s->len = s->sys;
    }
    uint64_t in = KVF_MAX((uint64_t)1, KVF_MIN((uint64_t)s->len + add, (uint64_t)x->g.max_context));
    if (emit) {
        size_t nb = (size_t)(in / x->g.block_tokens);
        trc_rec_reserve(rec, nb);
        uint64_t prev = 0;
        for (size_t i = 0; i < nb; i++)
            prev = rec->blocks[i] = block_id(x, prev, s->kind, s->sys, s->uid, s->conv, i);
        rec->nb = (uint32_t)nb;
        rec->src_bt = x->g.block_tokens;
        rec->t_ns = (int64_t)llround(t * 1e9);
        rec->in = (uint32_t)in;
        rec->out = out;
        rec->cls = prof_class[s->kind];
        rec->flags = flags;
        rec->images = x->g.images_p > 0 && kvf_rng_uniform(&x->ses) < x->g.images_p ? 1 : 0;
        rec->session = s->uid;
        rec->turn = s->turns;
        rec->key = x->n++;
        rec->prev_key = -1;
        rec->think_ns = 0;
        if (x->g.closed_loop && !first_of_visit && s->last_key >= 0) {
            rec->prev_key = s->last_key;
            rec->think_ns = (int64_t)llround(s->think * 1e9);
        }
        rec->line = (long)rec->key + 1;
        s->last_key = (int64_t)rec->key;
    } else
        s->last_key = -1;
    s->turns++;
    s->len = (uint32_t)KVF_MIN(in + out, (uint64_t)UINT32_MAX);
    days_schedule(x, si, t);
}

static int days_next(gsrc *x, trc_rec *rec) {
    for (;;) {
        if (x->g.max_requests > 0 && (int64_t)x->n >= x->g.max_requests) return 0;
        double th = x->nh ? x->heap[0].t : INFINITY, t;
        if (KVF_MIN(x->next_new, th) > x->horizon) return 0;
        uint32_t si;
        if (x->next_new <= th) {
            t = x->next_new;
            si = days_new_session(x);
            x->next_new = days_next_new(x, t);
        } else {
            devt e = heap_pop(x);
            t = e.t;
            si = e.s;
        }
        bool emit = t >= 0;
        days_turn(x, si, t, rec, emit);
        if (emit) return 1;
    }
}

// Days mode set-up: the new-session rate that gives rate_rps requests per s in the steady
// state (a session makes turns/(1 - p) requests on average), and the first arrival.
static void days_init(gsrc *x) {
    static const double mix[3] = {0.5, 0.3, 0.2};
    double per_session = 0;
    for (int k = 0; k < 3; k++) {
        double w = x->g.profile == TRC_GEN_MIXED ? mix[k] : (k == (int)x->g.profile);
        per_session += w * class_turns(x, k) / (1 - x->g.ret[k].p);
    }
    x->r_new = x->g.rate_rps / per_session;
    x->rmax = rhythm_max(&x->g);
    x->horizon = x->g.days * DAY_S;   // set before the first draw, which stops past it
    x->next_new = days_next_new(x, -x->g.warmup_days * DAY_S);
}

static int gen_next(trc_source *src, trc_rec *rec, kvf_err *err) {
    gsrc *x = (gsrc *)src;
    if (x->g.days > 0) return days_next(x, rec);
    if (x->g.max_requests > 0 && (int64_t)x->n >= x->g.max_requests) return 0;
    double t = x->t + next_gap(x);
    if (x->g.duration_s > 0 && t > x->g.duration_s) return 0;
    x->t = t;
    // pick the session
    gsess *s = NULL;
    size_t live = 0;
    for (size_t i = 0; i < POOL; i++)
        live += x->pool[i].live;
    if (live > 0 && kvf_rng_uniform(&x->ses) >= 1.0 / gen_mean_turns(x)) {
        uint32_t k = kvf_rng_below(&x->ses, (uint32_t)live);
        for (size_t i = 0; i < POOL; i++)
            if (x->pool[i].live && k-- == 0) {
                s = &x->pool[i];
                break;
            }
    }
    uint32_t add, out;
    if (s) {
        draw_turn(x, s, &add, &out);
        if ((uint64_t)s->len + add > x->g.max_context) {
            s->live = false;   // context full: the session ends, this arrival opens a new one
            s = NULL;
        }
    }
    if (!s) {
        s = new_session(x);
        draw_turn(x, s, &add, &out);
    }
    uint64_t in = (uint64_t)s->len + add;
    if (in > x->g.max_context) in = x->g.max_context;
    if (in < 1) in = 1;
    uint32_t B = x->g.block_tokens;
    size_t nb = (size_t)(in / B);
    extend_ids(x, s, nb);
    trc_rec_reserve(rec, nb);
    if (nb) memcpy(rec->blocks, s->ids, nb * sizeof *rec->blocks);
    rec->nb = (uint32_t)nb;
    rec->src_bt = B;
    rec->t_ns = (int64_t)llround(t * 1e9);
    rec->in = (uint32_t)in;
    rec->out = out;
    rec->cls = prof_class[s->kind];
    rec->flags = 0;
    rec->images = x->g.images_p > 0 && kvf_rng_uniform(&x->ses) < x->g.images_p ? 1 : 0;
    rec->session = s->uid;
    rec->turn = s->turns++;
    rec->key = x->n++;
    rec->prev_key = -1;
    rec->think_ns = 0;
    if (x->g.closed_loop && s->last_key >= 0) {
        rec->prev_key = s->last_key;
        rec->think_ns = (int64_t)llround(kvf_rng_exp(&x->ses, x->g.think_s) * 1e9);
    }
    s->last_key = (int64_t)rec->key;
    rec->line = (long)rec->key + 1;
    s->len = (uint32_t)KVF_MIN((uint64_t)in + out, (uint64_t)UINT32_MAX);
    (void)err;
    return 1;
}

static void gen_close(trc_source *src) {
    gsrc *x = (gsrc *)src;
    for (size_t i = 0; i < POOL; i++)
        free(x->pool[i].ids);
    free(x->ds);
    free(x->dfree);
    free(x->heap);
    free(x->len_in);
    free(x->len_out);
    free(x);
}

// Lengths CSV: a header naming num_prefill_tokens and num_decode_tokens, then integers.
static kvf_status load_lengths(gsrc *x, const char *path, kvf_err *err) {
    FILE *f = kvf_open_input(path, err);
    if (!f) return err ? err->code : KVF_ENOENT;
    trc_lines l = {.f = f};
    char *line;
    kvf_status st = KVF_OK;
    int ci = -1, co = -1;
    size_t cap = 0;
    if (trc_lines_next(&l, &line) < 0) {
        st = kvf_fail(err, KVF_EPARSE, "%s:1: empty file", path);
        goto done;
    }
    {
        int k = 0;
        for (char *tok = strtok(line, ","); tok; tok = strtok(NULL, ","), k++) {
            if (!strcmp(tok, "num_prefill_tokens")) ci = k;
            if (!strcmp(tok, "num_decode_tokens")) co = k;
        }
    }
    if (ci < 0 || co < 0) {
        st = kvf_fail(err, KVF_EPARSE, "%s:%ld: field '%s': missing from the header", path, l.line,
                      ci < 0 ? "num_prefill_tokens" : "num_decode_tokens");
        goto done;
    }
    while (trc_lines_next(&l, &line) >= 0) {
        uint64_t vi = 0, vo = 0;
        bool gi = false, go = false;
        int k = 0;
        char *save = NULL;
        for (char *tok = strtok_r(line, ",", &save); tok; tok = strtok_r(NULL, ",", &save), k++) {
            if (k == ci) gi = trc_parse_u64(tok, &vi);
            if (k == co) go = trc_parse_u64(tok, &vo);
        }
        if (!gi || !go) {
            st = kvf_fail(err, KVF_EPARSE, "%s:%ld: field '%s': not a token count", path, l.line,
                          !gi ? "num_prefill_tokens" : "num_decode_tokens");
            goto done;
        }
        if (x->nlens + 1 > cap) {
            size_t c2 = cap;
            kvf_grow((void **)&x->len_in, &cap, x->nlens + 1, sizeof *x->len_in);
            kvf_grow((void **)&x->len_out, &c2, x->nlens + 1, sizeof *x->len_out);
        }
        x->len_in[x->nlens] = vi ? (uint32_t)KVF_MIN(vi, (uint64_t)UINT32_MAX) : 1;
        x->len_out[x->nlens] = vo ? (uint32_t)KVF_MIN(vo, (uint64_t)UINT32_MAX) : 1;
        x->nlens++;
    }
    if (!x->nlens) st = kvf_fail(err, KVF_EPARSE, "%s: no rows", path);
done:
    trc_lines_free(&l);
    fclose(f);
    return st;
}

// days mode's options: the day and week rhythm, the warm-up, and each class's returns
static kvf_status check_days_options(const trc_gen_options *g, kvf_err *err) {
    static const char *cls[3] = {"chatbot", "agent", "coding"};
    if (!(g->diurnal_amplitude >= 0 && g->diurnal_amplitude < 1))
        return kvf_fail(err, KVF_EINVAL, "generate: diurnal_amplitude must be in [0, 1)");
    if (!(g->peak_hour >= 0 && g->peak_hour < 24))
        return kvf_fail(err, KVF_EINVAL, "generate: peak_hour must be in [0, 24)");
    if (!(g->weekend_ratio > 0 && g->weekend_ratio <= 10))
        return kvf_fail(err, KVF_EINVAL, "generate: weekend_ratio must be in (0, 10]");
    if (g->start_weekday > 6)
        return kvf_fail(err, KVF_EINVAL, "generate: start_weekday must be 0 (Monday) .. 6");
    if (!(g->warmup_days >= 0 && g->warmup_days <= 365))
        return kvf_fail(err, KVF_EINVAL, "generate: warmup_days must be in [0, 365]");
    if (g->rate_rps * g->warmup_days * 86400 > 10 * TRC_GEN_MAX_REQUESTS)
        return kvf_fail(err, KVF_EINVAL,
                        "generate: warmup_days x 86400 x rate_rps (--warmup-days x --rate) = "
                        "%g requests drawn before t = 0, over the %g limit",
                        g->rate_rps * g->warmup_days * 86400, 10 * TRC_GEN_MAX_REQUESTS);
    if (g->mean_turns > 0 && g->mean_turns < 1)
        return kvf_fail(err, KVF_EINVAL, "generate: mean_turns must be >= 1 in days mode");
    for (int k = 0; k < 3; k++) {
        const trc_gen_return *r = &g->ret[k];
        if (!(r->p >= 0 && r->p <= 0.99))
            return kvf_fail(err, KVF_EINVAL, "generate: return.%s.p must be in [0, 0.99]", cls[k]);
        if (!(r->median_h > 0 && r->median_h <= 24 * 3660.0))
            return kvf_fail(err, KVF_EINVAL,
                            "generate: return.%s.median_h must be in (0, 87840] hours", cls[k]);
        if (!(r->sigma >= 0 && r->sigma <= 5))
            return kvf_fail(err, KVF_EINVAL, "generate: return.%s.sigma must be in [0, 5]", cls[k]);
    }
    return KVF_OK;
}

kvf_status trc_src_gen(trc_source **out, const trc_gen_options *g, kvf_err *err) {
    *out = NULL;
    if (!(g->rate_rps > 0) || !isfinite(g->rate_rps))
        return kvf_fail(err, KVF_EINVAL, "generate: rate_rps must be > 0");
    if (!(g->duration_s > 0) && g->max_requests <= 0)
        return kvf_fail(err, KVF_EINVAL, "generate: give duration_s > 0 or max_requests > 0");
    if (g->rate_rps > 1e6)
        return kvf_fail(err, KVF_EINVAL, "generate: rate_rps must be at most 1e6, got %g",
                        g->rate_rps);
    if (!(g->duration_s <= 3.2e7))
        return kvf_fail(err, KVF_EINVAL,
                        "generate: duration_s must be at most 3.2e7 (a year), got %g",
                        g->duration_s);
    if (!(g->days >= 0) || g->days > 3660)
        return kvf_fail(err, KVF_EINVAL, "generate: days must be in [0, 3660], got %g", g->days);
    // Every quantity the generator derives is bounded here, before use: the expected number of
    // requests (days mode: days x 86400 x rate_rps, returns included by construction) and the
    // rate itself, whose gaps feed the clock (1e-30 req/s would draw a first arrival 1e30 s out).
    double horizon_s = g->days > 0 ? g->days * 86400 : g->duration_s;
    if (g->rate_rps < TRC_GEN_MIN_RATE)
        return kvf_fail(err, KVF_EINVAL,
                        "generate: rate_rps (--rate) must be at least %g req/s, got %g",
                        TRC_GEN_MIN_RATE, g->rate_rps);
    if (g->max_requests <= 0 && g->rate_rps * horizon_s > TRC_GEN_MAX_REQUESTS)
        return kvf_fail(err, KVF_EINVAL,
                        g->days > 0
                            ? "generate: days x 86400 x rate_rps (--days x --rate) = %g requests, "
                              "over the %g limit (give max_requests or a lower rate)"
                            : "generate: rate_rps x duration_s (--rate x --duration) = %g "
                              "requests, over the %g limit (give max_requests or a lower rate)",
                        g->rate_rps * horizon_s, TRC_GEN_MAX_REQUESTS);
    if ((unsigned)g->profile > TRC_GEN_MIXED || (unsigned)g->arrival > TRC_ARRIVAL_DIURNAL)
        return kvf_fail(err, KVF_EINVAL, "generate: unknown profile or arrival process");
    if (g->arrival == TRC_ARRIVAL_GAMMA && !(g->cv > 0))
        return kvf_fail(err, KVF_EINVAL, "generate: cv must be > 0");
    if (g->arrival == TRC_ARRIVAL_DIURNAL &&
        (g->diurnal_amplitude < 0 || g->diurnal_amplitude >= 1 || !(g->diurnal_period_s > 0)))
        return kvf_fail(err, KVF_EINVAL, "generate: diurnal amplitude must be in [0, 1)");
    if (g->images_p < 0 || g->images_p > 1)
        return kvf_fail(err, KVF_EINVAL, "generate: images must be a probability in [0, 1]");
    for (int k = 0; k < 3; k++)
        if (!(g->mix[k] >= 0) || !isfinite(g->mix[k]))
            return kvf_fail(err, KVF_EINVAL, "generate: mix shares must be >= 0");
    if (g->input_len > TRC_MAX_TOKENS || g->output_len > TRC_MAX_TOKENS ||
        g->max_context > TRC_MAX_TOKENS)
        return kvf_fail(err, KVF_EINVAL,
                        "generate: input_len, output_len and max_context (--input-len, "
                        "--output-len) must be at most %g tokens",
                        TRC_MAX_TOKENS);
    if (!(g->think_s >= 0 && g->think_s <= 1e7))
        return kvf_fail(err, KVF_EINVAL,
                        "generate: think_s (--think) must be in [0, 1e7] s, got %g", g->think_s);
    if (!g->block_tokens || g->max_context < 2)
        return kvf_fail(err, KVF_EINVAL, "generate: block_tokens and max_context must be > 0");
    if (g->days > 0) {
        kvf_status st = check_days_options(g, err);
        if (st) return st;
    }
    gsrc *x = kvf_calloc(1, sizeof *x);
    x->g = *g;
    x->g.lengths_path = NULL;
    kvf_rng_init(&x->arr, g->seed, 1);
    kvf_rng_init(&x->ses, g->seed, 2);
    kvf_rng_init(&x->vis, g->seed, 3);
    if (g->days > 0) {
        x->g.duration_s = g->days * DAY_S;
        days_init(x);
    }
    if (g->lengths_path) {
        kvf_status st = load_lengths(x, g->lengths_path, err);
        if (st) {
            gen_close(&x->base);
            return st;
        }
    }
    x->base.next = gen_next;
    x->base.close = gen_close;
    x->base.fmt = TRC_FMT_KVFLEET;
    x->base.sorted = true;
    x->base.origin_zero = true;
    snprintf(x->base.notes, sizeof x->base.notes,
             "generated: profile=%s arrival=%s rate=%g/s seed=%llu lengths=%s",
             trc_gen_profile_name(g->profile), g->days > 0 ? "days" : trc_arrival_name(g->arrival),
             g->rate_rps, (unsigned long long)g->seed,
             g->input_len || g->output_len ? "fixed"
             : g->lengths_path             ? "empirical"
                                           : "profile");
    if (g->days > 0) {
        size_t n = strlen(x->base.notes);
        snprintf(x->base.notes + n, sizeof x->base.notes - n,
                 " days=%g amplitude=%g peak_hour=%g weekend_ratio=%g start_weekday=%u "
                 "warmup_days=%g return(p,median_h,sigma)=%g,%g,%g/%g,%g,%g/%g,%g,%g",
                 g->days, g->diurnal_amplitude, g->peak_hour, g->weekend_ratio, g->start_weekday,
                 g->warmup_days, g->ret[0].p, g->ret[0].median_h, g->ret[0].sigma, g->ret[1].p,
                 g->ret[1].median_h, g->ret[1].sigma, g->ret[2].p, g->ret[2].median_h,
                 g->ret[2].sigma);
    }
    *out = &x->base;
    return KVF_OK;
}

kvf_status trc_gen_open(trc_reader **out, const trc_gen_options *g, const trc_options *opt,
                        kvf_err *err) {
    *out = NULL;
    trc_options o;
    if (opt)
        o = *opt;
    else {
        trc_options_default(&o);
        o.block_tokens = g->block_tokens;
    }
    if (!o.block_tokens) return kvf_fail(err, KVF_EINVAL, "block_tokens must be >= 1");
    trc_gen_options gd;
    if (g->days > 0) {
        // Days mode keeps the clock: a rescaled time axis would shorten the day and the week.
        // A target rate becomes the generator's own rate instead.
        if (o.time_scale != 1.0)
            return kvf_fail(err, KVF_EINVAL,
                            "time_scale %g would stretch the days of generate.days; set "
                            "generate.rate_rps instead",
                            o.time_scale);
        if (o.rate_rps > 0) {
            gd = *g;
            gd.rate_rps = o.rate_rps;
            o.rate_rps = 0;
            g = &gd;
        }
    }
    if (o.rate_rps > 0) {
        // the generator knows its own mean rate: rescale without a first pass
        double ts = g->rate_rps / o.rate_rps;
        if (!(ts >= 1e-6 && ts <= 1e6))
            return kvf_fail(err, KVF_EINVAL,
                            "rate_rps %g is more than 1e6 times the generator's rate %g either way",
                            o.rate_rps, g->rate_rps);
        o.time_scale = ts;
        o.rate_rps = 0;
    }
    trc_source *src;
    kvf_status st = trc_src_gen(&src, g, err);
    if (st) return st;
    return trc_reader_from_source(out, src, NULL, "generate", &o, err);
}

kvf_status trc_gen_write(const trc_gen_options *g, const char *path, uint64_t *n_written,
                         kvf_err *err) {
    trc_reader *r;
    kvf_status st = trc_gen_open(&r, g, NULL, err);
    if (st) return st;
    trc_writer *w;
    if ((st = trc_writer_create(&w, path, g->block_tokens, TRC_W_FORCE, g->lengths_path, err))) {
        trc_reader_close(r);
        return st;
    }
    trc_request q;
    int rc;
    uint64_t n = 0;
    while ((rc = trc_reader_next(r, &q, err)) == 1) {
        if ((st = trc_writer_put(w, &q, err))) break;
        n++;
    }
    if (rc < 0) st = err ? err->code : KVF_ERUN;
    kvf_status st2 = KVF_OK;
    if (st)
        trc_writer_discard(w);
    else
        st2 = trc_writer_close(w, err);
    trc_reader_close(r);
    if (n_written) *n_written = n;
    return st ? st : st2;
}
