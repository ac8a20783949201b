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
// Random streams (seed, k): 1 arrivals, 2 sessions and lengths; runs are pure functions of
// the options.
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
    uint8_t kind;        // TRC_GEN_CHATBOT..CODING
    uint64_t uid;        // session id (never 0)
    uint32_t turns;      // turns so far
    uint32_t len;        // tokens of the stream so far (last prompt + last answer)
    uint32_t sys;        // system prompt tokens
    uint64_t *ids;       // chained ids of full blocks of the stream
    size_t nids, capids;
    int64_t last_key;    // key of the session's previous turn (closed loop), -1 = none
} gsess;

typedef struct gsrc {
    trc_source base;
    trc_gen_options g;
    kvf_rng arr, ses;
    double t;            // s
    uint64_t n;
    gsess pool[POOL];
    size_t next_slot;
    uint64_t next_uid;
    uint32_t *len_in, *len_out;
    size_t nlens;
} gsrc;

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
const char *trc_arrival_name(trc_arrival a) { return (unsigned)a < 3 ? arr_names[a] : "unknown"; }
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
    for (int k = 0; k < 3; k++) w[k] = s > 0 ? g->mix[k] / s : (k == 0 ? 0.5 : k == 1 ? 0.3 : 0.2);
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

// Extends the session's id chain to cover n full blocks.
static void extend_ids(gsrc *x, gsess *s, size_t n) {
    uint32_t B = x->g.block_tokens;
    if (n > s->capids) kvf_grow((void **)&s->ids, &s->capids, n, sizeof *s->ids);
    uint64_t sys_seed = kvf_hash_combine(x->g.seed ^ 0x5757ULL, s->kind);
    for (size_t i = s->nids; i < n; i++) {
        bool in_sys = (uint64_t)(i + 1) * B <= s->sys;
        uint64_t content = in_sys ? kvf_hash_combine(sys_seed, i) : kvf_hash_combine(s->uid, i);
        s->ids[i] = kvf_hash_combine(i ? s->ids[i - 1] : 0x6b7666ULL, content);
    }
    if (n > s->nids) s->nids = n;
}

static gsess *new_session(gsrc *x) {
    gsess *s = &x->pool[x->next_slot++ % POOL];
    s->live = true;
    if (x->g.profile == TRC_GEN_MIXED) {
        double u = kvf_rng_uniform(&x->ses), w[3];
        mix_shares(&x->g, w);
        s->kind = u < w[0] ? TRC_GEN_CHATBOT : u < w[0] + w[1] ? TRC_GEN_AGENT : TRC_GEN_CODING;
    } else s->kind = (uint8_t)x->g.profile;
    s->uid = kvf_hash_combine(x->g.seed, ++x->next_uid);
    if (!s->uid) s->uid = 1;
    s->turns = 0;
    s->sys = x->g.system_tokens >= 0 ? (uint32_t)x->g.system_tokens : profiles[s->kind].sys_tokens;
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
    default: return kvf_rng_exp(&x->arr, 1.0 / R);
    }
}

static int gen_next(trc_source *src, trc_rec *rec, kvf_err *err) {
    gsrc *x = (gsrc *)src;
    if (x->g.max_requests > 0 && (int64_t)x->n >= x->g.max_requests) return 0;
    double t = x->t + next_gap(x);
    if (x->g.duration_s > 0 && t > x->g.duration_s) return 0;
    x->t = t;
    // pick the session
    gsess *s = NULL;
    size_t live = 0;
    for (size_t i = 0; i < POOL; i++) live += x->pool[i].live;
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
    for (size_t i = 0; i < POOL; i++) free(x->pool[i].ids);
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
        st = kvf_fail(err, KVF_EPARSE, "%s:%ld: field '%s': missing from the header", path,
                      l.line, ci < 0 ? "num_prefill_tokens" : "num_decode_tokens");
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
    free(l.buf);
    fclose(f);
    return st;
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
        return kvf_fail(err, KVF_EINVAL, "generate: duration_s must be at most 3.2e7 (a year), got %g",
                        g->duration_s);
    if (g->max_requests <= 0 && g->rate_rps * g->duration_s > 1e8)
        return kvf_fail(err, KVF_EINVAL,
                        "generate: rate x duration = %g requests, over the 1e8 limit (give "
                        "max_requests or a lower rate)", g->rate_rps * g->duration_s);
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
    if (!g->block_tokens || g->max_context < 2)
        return kvf_fail(err, KVF_EINVAL, "generate: block_tokens and max_context must be > 0");
    gsrc *x = kvf_calloc(1, sizeof *x);
    x->g = *g;
    x->g.lengths_path = NULL;
    kvf_rng_init(&x->arr, g->seed, 1);
    kvf_rng_init(&x->ses, g->seed, 2);
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
             trc_gen_profile_name(g->profile), trc_arrival_name(g->arrival), g->rate_rps,
             (unsigned long long)g->seed,
             g->input_len || g->output_len ? "fixed"
             : g->lengths_path             ? "empirical"
                                           : "profile");
    *out = &x->base;
    return KVF_OK;
}

kvf_status trc_gen_open(trc_reader **out, const trc_gen_options *g, const trc_options *opt,
                        kvf_err *err) {
    *out = NULL;
    trc_options o;
    if (opt) o = *opt;
    else {
        trc_options_default(&o);
        o.block_tokens = g->block_tokens;
    }
    if (!o.block_tokens) return kvf_fail(err, KVF_EINVAL, "block_tokens must be >= 1");
    trc_source *src;
    kvf_status st = trc_src_gen(&src, g, err);
    if (st) return st;
    if (o.rate_rps > 0) {
        // the generator knows its own mean rate: rescale without a first pass
        o.time_scale = g->rate_rps / o.rate_rps;
        o.rate_rps = 0;
    }
    return trc_reader_from_source(out, src, NULL, "generate", &o, err);
}

kvf_status trc_gen_write(const trc_gen_options *g, const char *path, uint64_t *n_written,
                         kvf_err *err) {
    trc_reader *r;
    kvf_status st = trc_gen_open(&r, g, NULL, err);
    if (st) return st;
    trc_writer *w;
    if ((st = trc_writer_open(&w, path, g->block_tokens, err))) {
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
    kvf_status st2 = trc_writer_close(w, st ? NULL : err);
    trc_reader_close(r);
    if (n_written) *n_written = n;
    return st ? st : st2;
}
