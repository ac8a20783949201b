// cli/cli_opts.c -- the shared option table and the parser of cli_opts.h. The shared options
// are rows like a command's own, with their destination an offset into cli_common; the parser
// resolves both kinds into one row list per call and then treats them alike.
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_opts.h"
#include "kvf.h"
#include "sim.h"

// The shared options, in one place: what each is called and where its value lands.
static const struct {
    unsigned bit;
    const char *name, *alias;
    cli_kind kind;
    size_t off;   // into cli_common (--set: its sets array)
} COMMON[] = {
    {CLI_OUT, "-o", NULL, CLI_STR, offsetof(cli_common, out)},
    {CLI_FORCE, "--force", NULL, CLI_FLAG, offsetof(cli_common, force)},
    {CLI_JSON, "--json", NULL, CLI_FLAG, offsetof(cli_common, json)},
    {CLI_QUIET, "-q", "--quiet", CLI_FLAG, offsetof(cli_common, quiet)},
    {CLI_SET, "--set", NULL, CLI_LIST, offsetof(cli_common, sets)},
    {CLI_TRACE, "--trace", NULL, CLI_STR, offsetof(cli_common, trace)},
    {CLI_SEED, "--seed", NULL, CLI_STR, offsetof(cli_common, seed)},
};

enum { ROWS_MAX = 48 };   // shared plus own options of one command

static bool named(const cli_opt *o, const char *a) {
    return !strcmp(a, o->name) || (o->alias && !strcmp(a, o->alias));
}

static const cli_opt *find(const cli_opt *rows, int n, const char *a) {
    for (int i = 0; i < n; i++)
        if (named(&rows[i], a)) return &rows[i];
    return NULL;
}

// A row whose value may be attached, and a holds its name and then a value ("-j4").
static const cli_opt *find_attached(const cli_opt *rows, int n, const char *a) {
    for (int i = 0; i < n; i++) {
        size_t len = strlen(rows[i].name);
        if (rows[i].attached && !strncmp(a, rows[i].name, len) && a[len]) return &rows[i];
    }
    return NULL;
}

// Gathers the shared rows s takes (destinations in c, --set into sets) and its own rows.
static int resolve_rows(const cli_spec *s, cli_common *c, cli_list *sets, cli_opt *rows) {
    int n = 0;
    for (size_t i = 0; i < sizeof COMMON / sizeof COMMON[0]; i++) {
        if (!(s->common & COMMON[i].bit)) continue;
        void *dst = COMMON[i].kind == CLI_LIST ? (void *)sets : (char *)c + COMMON[i].off;
        rows[n++] = (cli_opt){
            .name = COMMON[i].name, .alias = COMMON[i].alias, .kind = COMMON[i].kind, .dst = dst};
    }
    for (int i = 0; i < s->nopts; i++) {
        const cli_opt *o = &s->opts[i];
        KVF_ASSERT(o->name && o->name[0] == '-' && (o->kind != CLI_CALL || o->call));
        KVF_ASSERT(!find(rows, n, o->name) && (!o->alias || !find(rows, n, o->alias)));
        KVF_ASSERT(n < ROWS_MAX);
        rows[n++] = *o;
    }
    return n;
}

// Takes the value val (NULL for a flag) of row o, given as a; CLI_GO or an exit code.
static int take(const cli_spec *s, const cli_opt *o, const char *a, const char *val) {
    switch (o->kind) {
    case CLI_FLAG:
        *(bool *)o->dst = true;
        return CLI_GO;
    case CLI_STR:
        *(const char **)o->dst = val;
        return CLI_GO;
    case CLI_LIST: {
        cli_list *l = o->dst;
        if (l->n == l->max) {
            fprintf(stderr, "kvfleet %s: at most %d %s options\n", s->cmd, l->max, o->name);
            return 2;
        }
        l->v[l->n++] = val;
        return CLI_GO;
    }
    case CLI_CALL: {
        int rc = o->call(s, a, val, o->dst);
        return rc ? rc : CLI_GO;
    }
    }
    KVF_ASSERT(!"unknown option kind");
    return 2;
}

int cli_parse(const cli_spec *s, int argc, char **argv, cli_common *c) {
    KVF_ASSERT(s && s->cmd && s->usage && c && argv);
    KVF_ASSERT(s->first >= 1 && (s->nopts == 0 || s->opts) && (s->npos == 0 || s->pos));
    memset(c, 0, sizeof *c);
    if (kvf_cli_help(argc - s->first + 1, argv + s->first - 1)) return s->usage(stdout, 0);
    cli_list sets = {c->sets, 0, CLI_SETS_MAX};
    cli_opt rows[ROWS_MAX];
    int nrows = resolve_rows(s, c, &sets, rows), npos = 0;
    for (int i = s->first; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        const cli_opt *o = find(rows, nrows, a);
        if (o && o->kind != CLI_FLAG) {
            if (i + 1 == argc) {
                fprintf(stderr, "kvfleet %s: option '%s' needs a value\n", s->cmd, a);
                return s->usage(stderr, 2);
            }
            val = argv[++i];
        } else if (!o && (o = find_attached(rows, nrows, a))) {
            val = a + strlen(o->name);
        } else if (!o && (a[0] == '-' || s->npos == 0)) {
            fprintf(stderr, "kvfleet %s: unknown option '%s'\n", s->cmd, a);
            return s->usage(stderr, 2);
        } else if (!o && npos < s->npos) {
            s->pos[npos++] = a;
            continue;
        } else if (!o) {
            fprintf(stderr, "kvfleet %s: unexpected argument '%s'\n", s->cmd, a);
            return s->usage(stderr, 2);
        }
        int rc = take(s, o, a, val);
        if (rc != CLI_GO) return rc;
        c->nsets = sets.n;
    }
    return CLI_GO;
}

kvf_status cli_set_literal(sim_config *c, const char *key, const char *value, kvf_err *err) {
    KVF_ASSERT(c && key && value);
    // key="value" with the value as one YAML double-quoted scalar: nothing in it is YAML
    // syntax ('#', ': ', '[', "null" all stay text)
    size_t n = strlen(key) + 4 * strlen(value) + 4;
    char *a = kvf_malloc(n), *p = a;
    p += snprintf(p, n, "%s=\"", key);
    for (const unsigned char *q = (const unsigned char *)value; *q; q++) {
        if (*q == '"' || *q == '\\') {
            *p++ = '\\';
            *p++ = (char)*q;
        } else if (*q < 0x20 || *q == 0x7f) {
            p += snprintf(p, 5, "\\x%02x", *q);
        } else if (q[0] == 0xc2 && q[1] == 0x85) {   // U+0085, a YAML line break: folded
            p += snprintf(p, 3, "\\N");
            q++;
        } else if (q[0] == 0xe2 && q[1] == 0x80 && (q[2] == 0xa8 || q[2] == 0xa9)) {
            p += snprintf(p, 3, "\\%c", q[2] == 0xa8 ? 'L' : 'P');   // U+2028, U+2029
            q += 2;
        } else {
            *p++ = (char)*q;
        }
    }
    *p++ = '"';
    *p = '\0';
    kvf_status st = sim_config_set(c, a, err);
    free(a);
    return st;
}
