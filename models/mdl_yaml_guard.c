// models/mdl_yaml_guard.c -- a bounded pre-pass over YAML text before libyaml builds a
// document: libyaml's loader has no limit on nesting depth (its load is quadratic in it), follows
// an alias to a node still being built (a loop that recursion over the document never leaves),
// and expands aliases without bound ("billion laughs"). The pre-pass reads the event stream
// once, in time linear in the text, and refuses such input with file:line.
#include <string.h>
#include <yaml.h>

#include "mdl.h"

#define GUARD_ANCHORS 256

typedef struct anchor {
    char name[64];
    size_t nodes;   // expanded node count of the anchored node; 0 while it is still open
    bool open;
} anchor;

typedef struct frame {
    size_t nodes;   // expanded nodes so far in this collection
    int anchor;     // index into anchors, -1 = none
} frame;

static int find_anchor(anchor *a, int n, const char *name) {
    for (int i = n - 1; i >= 0; i--)
        if (!strcmp(a[i].name, name)) return i;
    return -1;
}

kvf_status mdl_yaml_guard(const char *where, const char *text, size_t len, kvf_err *err) {
    const char *nul = memchr(text, 0, len);
    if (nul) {   // libyaml would stop there and silently drop the rest
        int line = 1;
        for (const char *q = text; q < nul; q++)
            line += *q == '\n';
        return kvf_fail(err, KVF_EPARSE, "%s:%d: a NUL byte (a binary file?)", where, line);
    }
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return kvf_fail(err, KVF_ENOMEM, "%s: cannot create a YAML parser", where);
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    static __thread anchor anchors[GUARD_ANCHORS];
    static __thread frame stack[MDL_YAML_MAX_DEPTH + 2];
    int n_anchors = 0, depth = 0;
    size_t total = 0;   // expanded nodes in the whole stream
    kvf_status st = KVF_OK;
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) break;   // syntax errors: the loader reports them
        int line = (int)ev.start_mark.line + 1;
        yaml_event_type_t t = ev.type;
        size_t add = 0;
        const char *anc = NULL;
        if (t == YAML_SCALAR_EVENT) {
            add = 1;
            anc = (const char *)ev.data.scalar.anchor;
        } else if (t == YAML_ALIAS_EVENT) {
            int i = find_anchor(anchors, n_anchors, (const char *)ev.data.alias.anchor);
            if (i >= 0 && anchors[i].open) {
                st = kvf_fail(err, KVF_EPARSE,
                              "%s:%d: alias '*%s' refers to a node that contains it (an alias "
                              "loop)",
                              where, line, anchors[i].name);
            } else
                add = i >= 0 ? anchors[i].nodes : 1;
        } else if (t == YAML_MAPPING_START_EVENT || t == YAML_SEQUENCE_START_EVENT) {
            if (depth >= MDL_YAML_MAX_DEPTH) {
                st = kvf_fail(err, KVF_EPARSE, "%s:%d: nested deeper than %d levels", where, line,
                              MDL_YAML_MAX_DEPTH);
            } else {
                anc = (const char *)(t == YAML_MAPPING_START_EVENT ? ev.data.mapping_start.anchor
                                                                   : ev.data.sequence_start.anchor);
                int ai = -1;
                if (anc) {
                    if (n_anchors >= GUARD_ANCHORS) {
                        st = kvf_fail(err, KVF_EPARSE, "%s:%d: more than %d anchors", where, line,
                                      GUARD_ANCHORS);
                    } else {
                        ai = n_anchors++;
                        snprintf(anchors[ai].name, sizeof anchors[ai].name, "%s", anc);
                        anchors[ai].open = true;
                        anchors[ai].nodes = 0;
                    }
                }
                stack[++depth] = (frame){.nodes = 1, .anchor = ai};
            }
            anc = NULL;
        } else if ((t == YAML_MAPPING_END_EVENT || t == YAML_SEQUENCE_END_EVENT) && depth > 0) {
            frame f = stack[depth--];
            if (f.anchor >= 0) {
                anchors[f.anchor].open = false;
                anchors[f.anchor].nodes = f.nodes;
            }
            add = f.nodes;
            if (depth > 0) stack[depth].nodes += add;
            add = 0;   // counted into the parent above
            if (depth == 0) total += f.nodes;
        }
        if (anc && !st) {   // an anchored scalar
            if (n_anchors >= GUARD_ANCHORS)
                st = kvf_fail(err, KVF_EPARSE, "%s:%d: more than %d anchors", where, line,
                              GUARD_ANCHORS);
            else {
                snprintf(anchors[n_anchors].name, sizeof anchors[n_anchors].name, "%s", anc);
                anchors[n_anchors].open = false;
                anchors[n_anchors++].nodes = 1;
            }
        }
        if (add) {
            if (depth > 0)
                stack[depth].nodes += add;
            else
                total += add;
        }
        size_t now = total + (depth > 0 ? stack[depth].nodes : 0);
        for (int d = 1; d < depth; d++)
            now += stack[d].nodes;
        if (!st && now > MDL_YAML_MAX_NODES)
            st = kvf_fail(err, KVF_EPARSE, "%s:%d: more than %d nodes once aliases are expanded",
                          where, line, MDL_YAML_MAX_NODES);
        bool end = t == YAML_STREAM_END_EVENT;
        yaml_event_delete(&ev);
        if (st || end) break;
    }
    yaml_parser_delete(&p);
    return st;
}
