// engine/eng_cli.c -- the engine's commands (argv[1] is the subcommand; argv[0] is "engine"
// under kvfleet or the program name under kvfleet-engine):
//   profile [--model M] [--backend cpu|cuda] [--quick] [--cpu-clock] [-o FILE]
//           [--check PROFILE [--bound-ms X] [--max-ratio R]] [--threads N] [--seed N]
//   info    [--model M] [--backend B]        model, arena sizes, hardware id
//   bench   gemm|attn [--backend B] [--threads N]   GEMM GFLOP/s, decode-attention GB/s
// `engine serve` reads traces and lives in the kvfleet command (sim/); this file only points
// there. Prints messages as "kvfleet: <msg>" and returns kvf_exit_code(status).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_int.h"

static void usage(FILE *f) {
    fprintf(f, "usage:\n"
               "  kvfleet engine profile [--model M] [--backend cpu|cuda] [--quick] [--cpu-clock]\n"
               "                         [-o FILE] [--threads N] [--seed N]\n"
               "  kvfleet engine profile --check PROFILE [--bound-ms X] [--max-ratio R]\n"
               "  kvfleet engine info [--model M] [--backend cpu|cuda]\n"
               "  kvfleet engine bench gemm|attn [--backend cpu|cuda] [--threads N]\n"
               "  kvfleet engine serve --trace FILE ...   (the kvfleet command; see its help)\n");
}

static int fail(kvf_status st, const kvf_err *err) {
    fprintf(stderr, "kvfleet: %s\n", err->msg);
    return kvf_exit_code(st);
}

typedef struct args {
    const char *model, *out, *check, *backend, *what;
    uint32_t threads;
    uint64_t seed;
    bool quick, cpu_clock;
    double bound_ms, max_ratio;
} args;

static kvf_status parse_args(int argc, char **argv, args *a, kvf_err *err) {
    memset(a, 0, sizeof *a);
    for (int i = 2; i < argc; i++) {
        const char *s = argv[i];
        bool has = i + 1 < argc;
        if (!strcmp(s, "--quick"))
            a->quick = true;
        else if (!strcmp(s, "--cpu-clock"))
            a->cpu_clock = true;
        else if ((!strcmp(s, "--bound-ms") || !strcmp(s, "--max-ratio")) && has) {
            char *end;
            double v = strtod(argv[++i], &end);
            if (*end || !*argv[i] || !(v > 0) || v > 1e9)
                return kvf_fail(err, KVF_EINVAL, "%s: expected a number > 0, got '%s'", s, argv[i]);
            if (s[2] == 'b')
                a->bound_ms = v;
            else if (v <= 1)
                return kvf_fail(err, KVF_EINVAL, "--max-ratio: expected a number > 1, got '%s'",
                                argv[i]);
            else
                a->max_ratio = v;
        } else if (!strcmp(s, "--model") && has)
            a->model = argv[++i];
        else if (!strcmp(s, "--backend") && has)
            a->backend = argv[++i];
        else if ((!strcmp(s, "-o") || !strcmp(s, "--output")) && has)
            a->out = argv[++i];
        else if (!strcmp(s, "--check") && has)
            a->check = argv[++i];
        else if ((!strcmp(s, "--threads") || !strcmp(s, "--seed")) && has) {
            char *end;
            unsigned long long v = strtoull(argv[++i], &end, 10);
            if (*end || !*argv[i])
                return kvf_fail(err, KVF_EINVAL, "%s: expected a number, got '%s'", s, argv[i]);
            if (s[2] == 't')
                a->threads = (uint32_t)v;
            else
                a->seed = v;
        } else if (s[0] != '-' && !a->what) {
            a->what = s;
        } else if (kvf_cli_missing_value(s, !has,
                                         "--model --backend -o --output --check "
                                         "--threads --seed --bound-ms --max-ratio")) {
            return kvf_fail(err, KVF_EINVAL, "engine %s: option '%s' needs a value", argv[1], s);
        } else {
            return kvf_fail(err, KVF_EINVAL, "engine %s: unknown option '%s'", argv[1], s);
        }
    }
    return KVF_OK;
}

static int cmd_profile(const args *a) {
    kvf_err err = {0};
    eng_profile_config c = {.model = a->model,
                            .threads = a->threads,
                            .quick = a->quick,
                            .seed = a->seed,
                            .cpu_clock = a->cpu_clock,
                            .check_bound_ms = a->bound_ms,
                            .check_max_ratio = a->max_ratio};
    kvf_status st = KVF_OK;
    if (a->backend && (st = eng_backend_parse(a->backend, &c.backend, &err))) return fail(st, &err);
    if (a->check) {
        if (!a->backend) {   // the profile's own backend
            char *text = NULL;
            size_t len;
            if (kvf_read_file(a->check, &text, &len, &err) == KVF_OK) {
                if (strstr(text, "# backend: cuda")) c.backend = ENG_BACKEND_CUDA;
                free(text);
            }
        }
        st = eng_profile_check(&c, a->check, stdout, &err);
        return st ? fail(st, &err) : 0;
    }
    FILE *f = stdout;
    if (a->out && strcmp(a->out, "-")) {
        f = fopen(a->out, "w");
        if (!f) {
            kvf_fail(&err, KVF_EIO, "%s: cannot write", a->out);
            return fail(KVF_EIO, &err);
        }
    }
    st = eng_profile_run(&c, f, stderr, &err);
    if (f != stdout && fclose(f) && !st) st = kvf_fail(&err, KVF_EIO, "%s: write failed", a->out);
    return st ? fail(st, &err) : 0;
}

static int cmd_info(const args *a) {
    kvf_err err = {0};
    eng_model_desc m;
    kvf_status st = eng_model_desc_load(&m, a->model ? a->model : "tiny-dense", NULL, &err);
    if (st) return fail(st, &err);
    eng_options o;
    eng_options_default(&o);
    o.threads = a->threads;
    if (a->backend && (st = eng_backend_parse(a->backend, &o.backend, &err))) return fail(st, &err);
    eng_engine *e;
    if ((st = eng_create(&e, &m, &o, &err))) return fail(st, &err);
    double w, kv, act;
    eng_arena_bytes(e, &w, &kv, &act);
    printf("model %s: %u layers, hidden %u, heads %u/%u x %u, ffn %u, vocab %u", m.name, m.layers,
           m.hidden, m.heads, m.kv_heads, m.head_dim, m.ffn, m.vocab);
    if (m.experts)
        printf(", experts %u top-%u + %u shared (ffn %u), %u dense layers", m.experts,
               m.experts_active, m.shared_experts, m.expert_ffn, m.dense_layers);
    if (m.window) printf(", window %u on %u layers", m.window, m.window_layers);
    printf("\nbackend %s on %s\narenas: weights %.1f MiB (%zu params), KV %.1f MiB (%u blocks of "
           "%u tokens), activations %.1f MiB\n",
           eng_backend_name(o.backend), eng_hardware_id(e), w / (1 << 20), eng_layout_get(e)->total,
           kv / (1 << 20), eng_opts(e)->kv_blocks, eng_opts(e)->block_tokens, act / (1 << 20));
    eng_destroy(e);
    return 0;
}

// CPU GEMM throughput: the shapes of a tiny model's prefill and a square one.
static int bench_cpu_gemm(uint32_t threads) {
    kvf_err err = {0};
    if (eng_cpu_blas_load(&err)) return fail(KVF_ERUN, &err);
    eng_cpu_set_threads(threads);
    static const uint32_t shapes[][3] = {
        {512, 1536, 512}, {512, 4096, 512}, {2048, 2048, 2048}, {16, 3072, 512}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        uint32_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *A = kvf_malloc((size_t)M * K * 4), *B = kvf_malloc((size_t)N * K * 4);
        float *C = kvf_malloc((size_t)M * N * 4);
        for (size_t i = 0; i < (size_t)M * K; i++)
            A[i] = eng_kv_value(1, i);
        for (size_t i = 0; i < (size_t)N * K; i++)
            B[i] = eng_kv_value(2, i);
        double v[7];
        for (int r = -1; r < 7; r++) {
            int64_t t0 = kvf_wall_ns();
            eng_sgemm_nt(M, N, K, 1.0f, A, K, B, K, 0.0f, C, N);
            if (r >= 0) v[r] = (double)(kvf_wall_ns() - t0);
        }
        kvf_sort_doubles(v, 7);
        printf("gemm cpu fp32 M=%u N=%u K=%u: %.1f GFLOP/s (median %.3f ms)\n", M, N, K,
               2.0 * M * N * K / v[3], v[3] / 1e6);
        free(A), free(B), free(C);
    }
    return 0;
}

static int cmd_bench(const args *a) {
    kvf_err err = {0};
    eng_backend be = ENG_BACKEND_CPU;
    kvf_status st;
    if (a->backend && (st = eng_backend_parse(a->backend, &be, &err))) return fail(st, &err);
    const char *what = a->what ? a->what : "gemm";
    if (be == ENG_BACKEND_CPU) {
        if (!strcmp(what, "gemm")) return bench_cpu_gemm(a->threads);
        kvf_fail(&err, KVF_EINVAL,
                 "engine bench %s: cpu supports gemm only (decode attention "
                 "is in the profile's decode rows)",
                 what);
        return fail(KVF_EINVAL, &err);
    }
#ifdef KVF_HAVE_CUDA
    char why[512];
    if (eng_cuda_load(why, sizeof why)) {
        kvf_fail(&err, KVF_ENODEV, "backend cuda: %s", why);
        return fail(KVF_ENODEV, &err);
    }
    if (eng_cuda_device_count() <= 0) {
        kvf_fail(&err, KVF_ENODEV, "backend cuda: no CUDA device is visible");
        return fail(KVF_ENODEV, &err);
    }
    char name[ENG_NAME_MAX] = "";
    eng_cuda_device_name(name, sizeof name);
    if (!strcmp(what, "gemm")) {
        static const int shapes[][3] = {{8192, 8192, 8192},
                                        {4096, 14336, 4096},
                                        {4096, 4096, 14336},
                                        {2048, 6144, 4096},
                                        {64, 6144, 4096}};
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            printf("gemm %s bf16 M=%d N=%d K=%d: %.1f TFLOP/s\n", name, shapes[s][0], shapes[s][1],
                   shapes[s][2], eng_cuda_bench_gemm(shapes[s][0], shapes[s][1], shapes[s][2], 20));
        return 0;
    }
    if (!strcmp(what, "attn")) {
        static const int shapes[][2] = {{16, 4096}, {64, 4096}, {128, 8192}, {32, 32768}};
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            printf("decode attention %s bf16 batch=%d context=%d heads=32/8x128: %.0f GB/s\n", name,
                   shapes[s][0], shapes[s][1],
                   eng_cuda_bench_decode_attn(shapes[s][0], shapes[s][1], 32, 8, 128, 16, 20));
        return 0;
    }
    kvf_fail(&err, KVF_EINVAL, "engine bench: expected gemm or attn, got '%s'", what);
    return fail(KVF_EINVAL, &err);
#else
    kvf_fail(&err, KVF_ENODEV, "backend cuda: this kvfleet was built without CUDA");
    return fail(KVF_ENODEV, &err);
#endif
}

int eng_cli_main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
        !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *sub = argv[1];
    if (kvf_cli_help(argc - 1, argv + 1)) {
        usage(stdout);
        return 0;
    }
    args a;
    kvf_err err = {0};
    if (!strcmp(sub, "serve")) {
        fprintf(stderr, "kvfleet: engine serve needs the trace readers of the full kvfleet "
                        "command (not part of the standalone engine build)\n");
        return 2;
    }
    kvf_status st = parse_args(argc, argv, &a, &err);
    if (st) {
        fprintf(stderr, "kvfleet: %s\n", err.msg);
        usage(stderr);
        return kvf_exit_code(st);
    }
    if (!strcmp(sub, "profile")) return cmd_profile(&a);
    if (!strcmp(sub, "info")) return cmd_info(&a);
    if (!strcmp(sub, "bench")) return cmd_bench(&a);
    fprintf(stderr, "kvfleet: engine: unknown subcommand '%s'\n", sub);
    usage(stderr);
    return 2;
}
