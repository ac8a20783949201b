// reports/rpt.h -- results database (SQLite), economics, and the report writer.
//
// The database holds the tables of design.md §5: run(key, value), request(...),
// timeseries(t_s, pool, instance, metric, value), summary(key, value). Rows are written in
// transactions of many rows; rpt_db_close commits what is pending, so an interrupted run
// leaves a readable database (the caller sets run.status = interrupted first).
#ifndef RPT_H
#define RPT_H

#include "kvf.h"

typedef struct rpt_db rpt_db;

// Creates (replacing) the database at path with the schema. KVF_ERUN with SQLite's message.
kvf_status rpt_db_create(rpt_db **out, const char *path, kvf_err *err);
// Commits pending rows and closes. Accepts NULL.
kvf_status rpt_db_close(rpt_db *db, kvf_err *err);
// Commits pending rows now (keeps the database open).
kvf_status rpt_db_flush(rpt_db *db, kvf_err *err);
// Upserts run(key, value).
kvf_status rpt_db_run_set(rpt_db *db, const char *key, const char *value, kvf_err *err);
// Upserts summary(key, value); key is a dotted path into summary.json ("ttft_ms.p90").
kvf_status rpt_db_summary_set(rpt_db *db, const char *key, double value, kvf_err *err);
kvf_status rpt_db_summary_set_text(rpt_db *db, const char *key, const char *value,
                                   kvf_err *err);

typedef struct rpt_request_row {
    uint64_t id;
    const char *cls;             // class name
    uint64_t session;
    double arrival_s;
    uint32_t input_tokens;
    uint32_t cached_tokens;      // prompt tokens served from cache (hit)
    uint32_t output_tokens;      // tokens produced
    int32_t vision_instance;     // -1 = none
    int32_t prefill_instance;    // -1 = none (rejected before prefill)
    int32_t decode_instance;     // -1 = none
    double ttft_s;               // NaN when no first token
    double tpot_s;               // NaN when < 2 output tokens
    double e2e_s;                // NaN when not completed
    double queue_s;              // time waiting in queues (prefill + decode admission)
    const char *status;          // "completed", "rejected:<reason>", "unfinished"
    // extensions (extra columns)
    uint32_t hit_hbm, hit_dram, hit_ssd;   // cached tokens by tier
    uint32_t preemptions;
} rpt_request_row;

kvf_status rpt_db_request(rpt_db *db, const rpt_request_row *r, kvf_err *err);
// pool: "prefill", "decode", "vision", "cluster", "kv"; instance -1 for pool-wide figures.
kvf_status rpt_db_timeseries(rpt_db *db, double t_s, const char *pool, int32_t instance,
                             const char *metric, double value, kvf_err *err);
// Raw handle for modules that add their own tables (sqlite3 *).
void *rpt_db_handle(rpt_db *db);

// Command line: `kvfleet report DIR [--format html|md]`, argv[0] = "report".
int rpt_report_cli_main(int argc, char **argv);
// Writes report.html and report.md into dir from dir/summary.json and dir/results.db.
kvf_status rpt_report_write(const char *dir, bool html, bool md, kvf_err *err);
// `kvfleet compare DIR... [--json]`, argv[0] = "compare".
int rpt_compare_cli_main(int argc, char **argv);

#endif
