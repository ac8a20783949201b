// cli/cli_opts.h -- the options several commands share, in one table (-o, --force, --json,
// -q/--quiet, --set, --trace, --seed), and the small table-driven parser every command in cli/
// runs over its argv, its own options beside the shared ones.
//
// A command describes itself once (cli_spec): its name for messages, the shared options it
// takes, its own rows (cli_opt) and its positional slots. cli_parse walks argv once, in order,
// so a value is checked where it stands, and prints the messages the commands print:
//   kvfleet CMD: option 'X' needs a value      a valued option last on the line, then usage
//   kvfleet CMD: unknown option 'X'            then usage
//   kvfleet CMD: unexpected argument 'X'       more words than positional slots, then usage
//   kvfleet CMD: at most N X options           a repeatable option given once too often
// A command without positional slots calls a stray word an unknown option (engine serve,
// validate). --help or -h anywhere before "--" prints the usage on stdout (kvf_cli_help).
#ifndef CLI_OPTS_H
#define CLI_OPTS_H

#include <stdbool.h>
#include <stdio.h>

#include "kvf.h"

enum { CLI_SETS_MAX = 256 };   // --set options one command line may give

// The shared options a command takes (cli_spec.common), and where each lands in cli_common.
enum {
    CLI_OUT = 1u << 0,     // -o PATH        the result directory or file   -> out
    CLI_FORCE = 1u << 1,   // --force        replace an earlier result      -> force
    CLI_JSON = 1u << 2,    // --json         the answer as JSON on stdout   -> json
    CLI_QUIET = 1u << 3,   // -q, --quiet    nothing but errors             -> quiet
    CLI_SET = 1u << 4,     // --set K=V      scenario key, repeatable       -> sets[nsets]
    CLI_TRACE = 1u << 5,   // --trace FILE   the trace to read              -> trace
    CLI_SEED = 1u << 6,    // --seed N       the run's seed, as given       -> seed
};

// The shared options as given; NULL / false / 0 when absent.
typedef struct cli_common {
    const char *out, *trace, *seed;
    bool force, json, quiet;
    const char *sets[CLI_SETS_MAX];   // --set values, in the order given
    int nsets;
} cli_common;

// A repeatable option's values, in order, into the caller's array of max entries.
typedef struct cli_list {
    const char **v;
    int n, max;
} cli_list;

typedef enum {
    CLI_FLAG,   // no value: *(bool *)dst = true
    CLI_STR,    // one value: *(const char **)dst = the value (the last one given wins)
    CLI_LIST,   // repeatable: appended to *(cli_list *)dst
    CLI_CALL,   // one value, handed to call (which checks it where it stands on the line)
} cli_kind;

typedef struct cli_spec cli_spec;

// One of a command's own options.
typedef struct cli_opt {
    const char *name;    // "--vary", "-j"
    const char *alias;   // another spelling, or NULL
    cli_kind kind;
    void *dst;   // see cli_kind; CALL: handed to call as is
    // CALL only: takes val for option opt (as spelled); returns 0 to go on, else the exit code
    // after printing its message (s->cmd names the command)
    int (*call)(const cli_spec *s, const char *opt, const char *val, void *dst);
    bool attached;   // STR: the value may follow the name in one word ("-j4")
} cli_opt;

// Rows of a command's table, one per kind.
#define CLI_OPT_FLAG(n, d)                                                                         \
    { .name = (n), .kind = CLI_FLAG, .dst = (d) }
#define CLI_OPT_STR(n, d)                                                                          \
    { .name = (n), .kind = CLI_STR, .dst = (d) }
#define CLI_OPT_LIST(n, d)                                                                         \
    { .name = (n), .kind = CLI_LIST, .dst = (d) }
#define CLI_OPT_CALL(n, d, fn)                                                                     \
    { .name = (n), .kind = CLI_CALL, .dst = (d), .call = (fn) }

struct cli_spec {
    const char *cmd;                 // names the command in messages: "run", "engine serve"
    int (*usage)(FILE *f, int rc);   // prints the command's usage on f and returns rc
    unsigned common;                 // CLI_OUT | CLI_JSON | ...: the shared options it takes
    const cli_opt *opts;             // its own options (names distinct from the shared ones)
    int nopts;
    const char **pos;   // positional slots, filled in order; untouched when absent
    int npos;           // 0: a word that is not an option is an unknown option
    int first;          // argv index of the first option, after the command's words
};

// cli_parse's answer when the command should go on and run.
#define CLI_GO (-1)

// Parses argv[s->first .. argc) into *c (cleared first), the command's own destinations and its
// positional slots. Returns CLI_GO when the command should run; 0 after printing the usage on
// stdout for --help; otherwise the exit code (2, or a CALL's) after printing the message (and,
// for a usage error, the usage) on stderr. argv's strings are kept by pointer, not copied.
int cli_parse(const cli_spec *s, int argc, char **argv, cli_common *c);

// Sets key to value as text, exactly as given (no YAML: "x #1.jsonl" stays whole, "null" is
// the four letters), recorded as set on the command line like --set; sim_config_set's status.
// For the shorthands (--trace, --seed) and paths a command fills in itself.
struct sim_config;
kvf_status cli_set_literal(struct sim_config *c, const char *key, const char *value, kvf_err *err);

#endif
