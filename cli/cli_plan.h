// cli/cli_plan.h -- inside cli/: the planner of `kvfleet plan` (cli_plan.c searches,
// cli_plan_out.c prints the answer).
#ifndef CLI_PLAN_H
#define CLI_PLAN_H

#include "sim.h"

enum { PLAN_GPI_MAX = 16, PLAN_INST_CAP = 4096, PLAN_SHAPES_MAX = 64 };

typedef struct plan_eval {
    int32_t p, d;                 // prefill, decode instances
    int32_t gp, gd;               // GPUs per instance of each pool
    int32_t tpp, epp, tpd, epd;   // TP and EP of each pool's instances, 0 = the scenario's
    double rate;                  // workload rate (req/s), 0 = the scenario's
    bool ran;                     // false: over --max-gpus, not run
    bool ok;                      // feasible: stable, completed > 0, both SLOs met
    bool ttft_ok, tpot_ok, stable;
    double ttft_p90, tpot_p90;   // ms
    double attainment;           // slo.attainment
    double cost_day;             // USD per day
    double gpus;                 // all GPUs of the run
    double util_p, util_d;       // busy fraction per pool
    double goodput_rps;          // slo.goodput_rps: requests a second that met their SLOs
    double goodput_tok_s;        // slo.goodput_tok_s: their output tokens a second
    char sat[16];                // saturation.state
    char class_miss[96];         // SLOs by class: the bounds missed ("chatbot ttft_ms.p90"), ""
    void *summary;               // the run's summary (json_t, owned by the planner) when
                                 // planner.keep_summaries, else NULL
} plan_eval;

// The instance shape of each pool during one search: GPUs per instance, and TP and EP over
// them (0 = the scenario's, whose own default is all the instance's GPUs).
typedef struct plan_size {
    int32_t gp, gd;               // prefill, decode
    int32_t tpp, epp, tpd, epd;   // TP, EP: prefill, decode
    char label[96];               // for messages, e.g. "1 GPU per instance"
} plan_size;

typedef struct planner {
    sim_config *base;            // scenario + --set + --slo
    double slo_ttft, slo_tpot;   // bounds (ms)
    int max_gpus;                // 0 = no limit
    bool colocated;
    const char *rate_key;   // workload.rate_rps or workload.generate.rate_rps
    plan_eval *ev;          // every configuration evaluated (memo)
    size_t n, cap;
    int runs;              // simulations run
    int shapes, pruned;    // instance shapes searched, and left out by the cost bound
    int unfit;             // shapes left out because their scenario is refused (e.g. the
                           // weights do not fit the instance's memory with room for KV)
    bool keep_summaries;   // --html: every run's summary kept for the page
    char why[512];         // why a search found nothing (for the output)
    kvf_status st;         // first failure of a run; the search stops
    kvf_err err;
} planner;

// Exit code of a plan that finds nothing feasible (no configuration, or no rate, meets the
// SLOs): distinct from 1 (the runs failed) and 2 (bad usage or input).
#define PLAN_EXIT_INFEASIBLE 3

// The answer of a search: the cheapest candidate, the runner-up (cheapest other feasible run)
// and the chosen point's "one instance fewer" neighbours (run by the walk-down), NULL if none.
typedef struct plan_answer {
    const plan_eval *best, *second, *fewer_p, *fewer_d;
} plan_answer;

// The max-rate answer: the scenario's rate r0, the highest rate seen feasible (lo, 0 = none)
// and the first failing one (hi) on the scenario's cluster (p x gp, d x gd), their runs.
typedef struct plan_rate {
    double r0, lo, hi, tol;
    const plan_eval *best, *fail;   // the runs at lo (NULL when none) and at hi
    int p, d, gp, gd;
} plan_rate;

// The cost-goodput frontier: the feasible runs no cheaper run matches in goodput, cheapest
// first (at most n written into out); returns how many.
size_t cli_plan_frontier(const planner *pl, const plan_eval **out, size_t n);
// The --find max-goodput answer: the offered rate (of those run) with the most goodput on the
// scenario's cluster, found by bracketing the peak and a golden-section search.
typedef struct plan_goodput {
    double r0, tol;
    const plan_eval *best;   // the run at the best rate (NULL when none ran)
    int p, d, gp, gd;
} plan_goodput;
void cli_plan_goodput_json(const planner *pl, const plan_goodput *g);
void cli_plan_goodput_text(const planner *pl, const plan_goodput *g);

// The answer of a search on stdout: as one JSON object (with every configuration evaluated),
// or as text lines.
void cli_plan_print_json(const planner *pl, const plan_answer *r, bool vary_ratio);
void cli_plan_print_text(const planner *pl, const plan_answer *r, bool vary_ratio);
// The answer of --find max-rate on stdout, as JSON or as text.
void cli_plan_rate_json(const planner *pl, const plan_rate *r);
void cli_plan_rate_text(const planner *pl, const plan_rate *r);

#endif
