// sim/config/sim_keys.h -- internals shared by the configuration's files: the key table's row
// type and the lookups and helpers the loader, validation and output share.
#ifndef SIM_KEYS_H
#define SIM_KEYS_H

#include <stddef.h>
#include <stdio.h>

#include "sim.h"

typedef enum key_kind {
    K_STR,        // any scalar, copied into char[size]
    K_NAME,       // one of names[], copied into char[size]
    K_ENUM,       // one of names[], its index stored in an enum (int-sized)
    K_NUM,        // number, range-checked in the file's unit, times scale, stored as ntype
    K_U64,        // unsigned 64-bit integer (seed), exact
    K_BOOL,       // true/false (also yes/no/on/off)
    K_DUR,        // duration "7d", "12h", "90m", "30s" (bare number = seconds) or "never" (-1)
    K_CAP,        // capacity: number times scale, "unlimited" (-1), or a byte size "100PiB"
    K_FMT,        // trace format (trc_format_parse)
    K_SCHEDULE,   // cluster.schedule: null or a list of {from_h, prefill, decode}
} key_kind;

typedef enum num_type { NT_DBL = 0, NT_I32, NT_U32, NT_I64 } num_type;

enum {
    F_NULL = 1,   // null accepted: numbers -> 0, strings -> ""
    F_INT = 2,    // the file value must be a whole number
    F_GT = 4,     // lo is exclusive (value > lo)
};

typedef struct keydef {
    const char *key;            // dotted key
    uint8_t kind;               // key_kind
    uint8_t ntype;              // num_type (K_NUM)
    uint8_t flags;              // F_*
    size_t off, size;           // target field in sim_config
    size_t off2;                // a second target getting the same value, 0 = none
    double lo, hi;              // allowed range in the file's unit
    double scale;               // file unit -> struct unit
    const char *const *names;   // K_NAME / K_ENUM
} keydef;

extern const keydef sim_key_table[];
extern const size_t sim_key_count;
extern const char *const sim_key_sections[];
extern const size_t sim_key_section_count;

// The row of a dotted key (NULL: not a leaf key).
const keydef *sim_key_find(const char *key);
// key is a section (a mapping of keys), e.g. "cluster.prefill".
bool sim_key_is_section(const char *key);
// key lies below economics. (handed to reports/ as text).
bool sim_key_under_economics(const char *key);

// Why key cannot apply to c (a pool key of a pool the mode does not have, ...); NULL if it can.
const char *sim_key_refused_for_pool(const sim_config *c, const char *key);
// Records that key was set at line (> 0 file line, -1 --set).
void sim_key_record_line(sim_config *c, const char *key, int line);
// Fields derived from others after a load or a --set.
void sim_config_sync_derived(sim_config *c);
// published.NAME.FIELD = text; KVF_EINVAL with why filled on a bad key or value.
kvf_status sim_key_set_published(sim_config *c, const char *key, const char *text, char *why,
                                 size_t wn);
// A YAML scalar as a finite number (no trailing text).
bool sim_key_parse_number(const char *s, double *out);
// true/false, yes/no, on/off.
bool sim_key_parse_bool(const char *s, bool *out);

// Copies src into dst[n], truncated and NUL-terminated.
static inline void copy_str(char *dst, size_t n, const char *src) {
    snprintf(dst, n, "%s", src);
}

// A stored number of type t at src.
double sim_key_load_num(const void *src, num_type t);
// A stored value in the file's unit (stored / scale, the double that scales back exactly).
double sim_key_file_value(double stored, double scale);
// Every number and name of c that differs from its default lies in the key table's range /
// names (the one place a range lives: values set in code are held to the same table as files
// and --set). KVF_EINVAL names the key (and file:line where it was set).
kvf_status sim_key_check_ranges(const sim_config *c, kvf_err *err);

// Stores v (in the struct's unit, range-checked by the caller) as type t at dst.
void sim_key_store_num(void *dst, num_type t, double v);
// serving.*: fills the keys not set explicitly from serving.preset, then from the terms of
// the serving.fit file (sim_serving.c). Called after every load and --set. Errors name the
// fit file, its line and the term.
kvf_status sim_serving_resolve(sim_config *c, kvf_err *err);

#endif
