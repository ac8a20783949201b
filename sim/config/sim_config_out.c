// sim/config/sim_config_out.c -- the resolved scenario as data (design.md §10 `config`): JSON with
// the scenario file's keys, and the same as YAML text through libyaml's emitter.
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <jansson.h>
#include <yaml.h>

#include "sim.h"
#include "sim_keys.h"
#include "sim_sample.h"

// ---- the resolved scenario as data (design.md §10 `config`) --------------------------------

// Paths are written absolute (resolved as the run resolved them), so the config runs the same
// from any folder.
static const char *const path_keys[] = {"model",
                                        "hardware",
                                        "profile",
                                        "workload.trace",
                                        "cluster.vision.hardware",
                                        "cluster.prefill.hardware",
                                        "cluster.decode.hardware",
                                        NULL};

// The object at dotted prefix below root, created on the way ("a.b" of "a.b.c").
static json_t *json_section(json_t *root, const char *key, const char **leaf) {
    char part[SIM_KEY_MAX];
    const char *p = key, *dot;
    json_t *o = root;
    while ((dot = strchr(p, '.'))) {
        size_t n = (size_t)(dot - p);
        snprintf(part, sizeof part, "%.*s", (int)n, p);
        json_t *sub = json_object_get(o, part);
        if (!json_is_object(sub)) {
            sub = json_object();
            json_object_set_new(o, part, sub);
        }
        o = sub;
        p = dot + 1;
    }
    *leaf = p;
    return o;
}

// The file value that stores back exactly (x * scale rounds to the stored value).

static json_t *num_json(double x, bool whole) {
    if (whole && x == floor(x) && fabs(x) < 9e15) return json_integer((json_int_t)x);
    return json_real(x);
}

static json_t *leaf_json(const sim_config *c, const keydef *d) {
    const char *src = (const char *)c + d->off;
    switch ((key_kind)d->kind) {
    case K_STR:
        if (!*src && d->flags & F_NULL) return json_null();
        for (int i = 0; path_keys[i]; i++)
            if (!strcmp(d->key, path_keys[i]) && *src) {
                char path[SIM_PATH_MAX + 160];
                if (!strcmp(d->key, "model"))
                    sim_config_model_path(c, path, sizeof path);
                else if (!strcmp(d->key, "hardware"))
                    sim_config_hardware_path(c, path, sizeof path);
                else if (kvf_endswith(d->key, ".hardware")) {
                    sim_pool_cfg pc = {0};
                    snprintf(pc.hardware, sizeof pc.hardware, "%s", src);
                    sim_config_pool_hardware_path(c, &pc, path, sizeof path);
                } else
                    sim_config_resolve(c, src, path, sizeof path);
                if (path[0] != '/') {   // relative to the current folder: make it absolute
                    char *real = realpath(path, NULL);
                    if (real) snprintf(path, sizeof path, "%s", real);
                    free(real);
                }
                return json_string(path);
            }
        return json_string(src);
    case K_NAME:
        return *src ? json_string(src) : json_null();
    case K_ENUM: {
        int i = *(const int *)src, n = 0;
        while (d->names[n])
            n++;
        return i >= 0 && i < n ? json_string(d->names[i]) : json_null();
    }
    case K_FMT:
        return json_string(trc_format_name(*(const trc_format *)src));
    case K_BOOL:
        return json_boolean(*(const bool *)src);
    case K_U64: {
        uint64_t v = *(const uint64_t *)src;
        if (v <= (uint64_t)INT64_MAX) return json_integer((json_int_t)v);
        char buf[32];
        snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
        return json_string(buf);
    }
    case K_NUM: {
        double x = sim_key_file_value(sim_key_load_num(src, (num_type)d->ntype), d->scale);
        return num_json(x, d->ntype != NT_DBL || d->flags & F_INT);
    }
    case K_DUR: {
        int64_t ns = *(const int64_t *)src;
        char buf[48];
        if (ns < 0) return json_string("never");
        if (ns % KVF_NS_PER_S == 0)
            snprintf(buf, sizeof buf, "%llds", (long long)(ns / KVF_NS_PER_S));
        else
            return json_real((double)ns * 1e-9);   // bare number = seconds
        return json_string(buf);
    }
    case K_CAP: {
        double v = *(const double *)src;
        if (v < 0) return json_string("unlimited");
        return num_json(sim_key_file_value(v, d->scale), false);
    }
    case K_SCHEDULE: {
        if (!c->cluster.n_schedule) return json_null();
        json_t *a = json_array();
        for (int32_t i = 0; i < c->cluster.n_schedule; i++) {
            const sim_schedule_entry *s = &c->cluster.schedule[i];
            json_t *e = json_object();
            json_object_set_new(e, "from_h", num_json(s->from_h, true));
            if (s->prefill >= 0) json_object_set_new(e, "prefill", json_integer(s->prefill));
            if (s->decode >= 0) json_object_set_new(e, "decode", json_integer(s->decode));
            json_array_append_new(a, e);
        }
        return a;
    }
    }
    return json_null();
}

json_t *sim_config_to_json(const sim_config *c) {
    json_t *root = json_object();
    bool generate = c->workload.gen.profile[0] != '\0';
    for (size_t i = 0; i < sim_key_count; i++) {
        const keydef *d = &sim_key_table[i];
        // setting any workload.generate key turns the generator on: write them only when on
        if (!generate && !strncmp(d->key, "workload.generate.", 18)) continue;
        if (sim_key_refused_for_pool(c, d->key)) continue;   // a key that cannot apply is refused
        // the all-to-alls hold SMs beside compute only with two micro-batches (refused without)
        if (!c->moe.two_batch && !strcmp(d->key, "moe.comm_sms")) continue;
        const char *leaf = NULL;
        json_t *sec = json_section(root, d->key, &leaf);
        json_object_set_new(sec, leaf, leaf_json(c, d));
    }
    if (!generate) {
        const char *leaf = NULL;
        json_object_set_new(json_section(root, "workload.generate", &leaf), leaf, json_null());
    }
    json_object_set_new(root, "economics", rpt_econ_config_to_json(&c->econ));
    if (c->n_published) {
        json_t *pub = json_object();
        for (int32_t k = 0; k < c->n_published; k++) {
            const sim_published *p = &c->published[k];
            json_t *o = json_object();
            json_object_set_new(o, "value", json_real(p->value));
            if (!isnan(p->high)) json_object_set_new(o, "high", json_real(p->high));
            json_object_set_new(o, "role", json_string(p->output ? "output" : "input"));
            if (p->summary_key[0])
                json_object_set_new(o, "summary_key", json_string(p->summary_key));
            json_object_set_new(o, "scale", json_real(p->scale));
            if (p->unit[0]) json_object_set_new(o, "unit", json_string(p->unit));
            if (p->rests_on[0]) json_object_set_new(o, "rests_on", json_string(p->rests_on));
            json_object_set_new(pub, p->name, o);
        }
        json_object_set_new(root, "published", pub);
    }
    return root;
}

// ---- the same as YAML text (libyaml's emitter) ----------------------------------------------

static int emit_scalar(yaml_emitter_t *em, const char *text, bool quote) {
    yaml_event_t ev;
    yaml_scalar_style_t style = quote ? YAML_DOUBLE_QUOTED_SCALAR_STYLE : YAML_PLAIN_SCALAR_STYLE;
    if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)text, (int)strlen(text),
                                      !quote, quote, style))
        return 0;
    return yaml_emitter_emit(em, &ev);
}

// A string that a plain scalar would read as something else (a number, a bool, null) or that
// YAML cannot write plain is quoted.
static bool needs_quotes(const char *s) {
    double d;
    bool b;
    return !*s || sim_key_parse_number(s, &d) || sim_key_parse_bool(s, &b) || !strcmp(s, "null") ||
           !strcmp(s, "~") || strpbrk(s, ":#{}[],&*!|>'\"%@`") || isspace((unsigned char)*s) ||
           *s == '-' || *s == '?';
}

static int emit_json(yaml_emitter_t *em, const json_t *v) {
    yaml_event_t ev;
    if (json_is_object(v)) {
        if (!yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE) ||
            !yaml_emitter_emit(em, &ev))
            return 0;
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x) {
            if (!emit_scalar(em, k, false) || !emit_json(em, x)) return 0;
        }
        return yaml_mapping_end_event_initialize(&ev) && yaml_emitter_emit(em, &ev);
    }
    if (json_is_array(v)) {
        bool flat = true;   // a list of numbers is written on one line
        for (size_t i = 0; i < json_array_size(v); i++)
            flat = flat && !json_is_object(json_array_get(v, i));
        if (!yaml_sequence_start_event_initialize(
                &ev, NULL, NULL, 1, flat ? YAML_FLOW_SEQUENCE_STYLE : YAML_BLOCK_SEQUENCE_STYLE) ||
            !yaml_emitter_emit(em, &ev))
            return 0;
        for (size_t i = 0; i < json_array_size(v); i++)
            if (!emit_json(em, json_array_get(v, i))) return 0;
        return yaml_sequence_end_event_initialize(&ev) && yaml_emitter_emit(em, &ev);
    }
    if (json_is_string(v))
        return emit_scalar(em, json_string_value(v), needs_quotes(json_string_value(v)));
    if (json_is_real(v)) {   // the shortest text that reads back as the same double
        char buf[40];
        double x = json_real_value(v);
        for (int prec = 15; prec <= 17; prec++) {
            snprintf(buf, sizeof buf, "%.*g", prec, x);
            if (strtod(buf, NULL) == x) break;
        }
        if (!strpbrk(buf, ".eEn")) strcat(buf, ".0");
        return emit_scalar(em, buf, false);
    }
    char *text = json_dumps(v, JSON_ENCODE_ANY);
    int ok = text ? emit_scalar(em, text, false) : 0;
    free(text);
    return ok;
}

static int yaml_to_buffer(void *data, unsigned char *buf, size_t size) {
    FILE *f = data;
    return fwrite(buf, 1, size, f) == size;
}

char *sim_config_to_yaml(const sim_config *c) {
    json_t *j = sim_config_to_json(c);
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    yaml_emitter_t em;
    yaml_event_t ev;
    int ok = f && yaml_emitter_initialize(&em);
    if (ok) {
        yaml_emitter_set_output(&em, yaml_to_buffer, f);
        yaml_emitter_set_width(&em, 100);
        yaml_emitter_set_unicode(&em, 1);
        ok = yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING) &&
             yaml_emitter_emit(&em, &ev) &&
             yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1) &&
             yaml_emitter_emit(&em, &ev) && emit_json(&em, j) &&
             yaml_document_end_event_initialize(&ev, 1) && yaml_emitter_emit(&em, &ev) &&
             yaml_stream_end_event_initialize(&ev) && yaml_emitter_emit(&em, &ev);
        yaml_emitter_delete(&em);
    }
    if (f) fclose(f);
    json_decref(j);
    if (!ok) {
        free(out);
        return NULL;
    }
    return out;
}
