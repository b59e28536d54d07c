/* bench_cuda.c — GPU benchmark of the CUDA backend on synthetic models with the real
 * shapes of Llama-3.2-1B, TinyLlama-1.1B, Qwen2.5-0.5B and Llama-3.1-8B in BF16,
 * weights drawn on the device with cuRAND (no checkpoint download).
 *
 * In one run: the device-to-device copy bandwidth (the ceiling, bytes read + written);
 * per model: validation first (logits finite; a row of a 5-token step bitwise equal
 * to the 1-token step), then the time of one forward step for M = 1, 2, 4, 5, 8, 16
 * tokens at context 512 and 4096 (LM head included), a 512-token prefill, bytes
 * moved (weights + KV read) / time as a fraction of the ceiling, CUDA-graph replay vs
 * plain launches for the M = 1 and M = 5 steps, and the GEMMs on the model's projection
 * shapes (qkv, o, gate_up, down, lm_head) for M = 1..16, 24, 32, 48, 64, 128, 256: the
 * 16-row tensor-core kernel ("skinny"; launches of 16 rows above 16), the M-looped
 * batch-invariant kernel (sd_cuda_gemm_tcb, its rounding pass included; validated
 * bitwise equal to the skinny rows first), cublasGemmEx (BF16 activations) and the
 * CUDA-core baseline (M <= 16), each as time and weight bytes / time as a fraction of
 * the copy ceiling measured in the same run. Warm-up, then medians of CUDA
 * event timings. Writes JSON (argv: --out FILE, --models a,b, --reps N) and prints a
 * short table last. */
#define _POSIX_C_SOURCE 200809L /* bench_util.h: clock_gettime */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "bench_util.h"
#include "sd_cuda_ops.h"
#include "sd_cuda_runner.h"
#include "sd_runner.h"

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "bench: %s failed: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

typedef struct {
    const char *name;
    int vocab, hidden, inter, layers, heads, kv_heads, head_dim, tied, bias, llama3;
    float theta;
} bench_model;

static const bench_model k_models[] = {
    {"llama-3.2-1b", 128256, 2048, 8192, 16, 32, 8, 64, 1, 0, 1, 500000.0f},
    {"tinyllama-1.1b", 32000, 2048, 5632, 22, 32, 4, 64, 0, 0, 0, 10000.0f},
    {"qwen2.5-0.5b", 151936, 896, 4864, 24, 14, 2, 64, 1, 1, 0, 1000000.0f},
    {"llama-3.1-8b", 128256, 4096, 14336, 32, 32, 8, 128, 0, 0, 1, 500000.0f},
};

static float median(float *v, int n) {
    qsort(v, (size_t)n, sizeof(float), bench_cmp_float);
    return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
}

static int g_reps = 20;
static cudaEvent_t g_e0, g_e1;

/* Median milliseconds of fn(ctx) over g_reps timed runs after 3 warm-ups. */
typedef void (*bench_fn)(void *ctx, cudaStream_t s);
static float time_ms(bench_fn fn, void *ctx, cudaStream_t s) {
    float t[256];
    int reps = g_reps > 256 ? 256 : g_reps;
    for (int i = 0; i < 3; i++) fn(ctx, s);
    CK(cudaStreamSynchronize(s));
    for (int i = 0; i < reps; i++) {
        CK(cudaEventRecord(g_e0, s));
        fn(ctx, s);
        CK(cudaEventRecord(g_e1, s));
        CK(cudaEventSynchronize(g_e1));
        CK(cudaEventElapsedTime(&t[i], g_e0, g_e1));
    }
    return median(t, reps);
}

typedef struct { void *dst, *src; size_t bytes; } copy_ctx;
static void run_copy(void *c, cudaStream_t s) {
    copy_ctx *k = c;
    CK(cudaMemcpyAsync(k->dst, k->src, k->bytes, cudaMemcpyDeviceToDevice, s));
}

typedef struct { sd_runner *r; int n, pos; } step_ctx;
static void run_step(void *c, cudaStream_t s) {
    step_ctx *k = c;
    (void)s;
    specdec_status st = sd_cuda_runner_enqueue(k->r, k->n, k->pos, 1);
    if (st != SPECDEC_OK) {
        fprintf(stderr, "bench: enqueue failed: %s\n", k->r->err.msg);
        exit(1);
    }
}
typedef struct { cudaGraphExec_t g; } graph_ctx;
static void run_graph(void *c, cudaStream_t s) { CK(cudaGraphLaunch(((graph_ctx *)c)->g, s)); }

/* xc: x already in BF16 (cuBLAS); xt: the M-looped kernel's scratch. */
typedef struct { const void *w; const float *x; float *y; void *xc, *xt; int M, N, K; cublasHandle_t blas; } gemm_ctx;
static void run_skinny(void *c, cudaStream_t s) {
    gemm_ctx *k = c;
    sd_errbuf eb;
    const sd_cuda_gemm_args g = {
        .w = k->w, .wdt = SD_BF16, .bias = NULL, .x = k->x, .y = k->y, .ldy = k->N, .n = k->M, .n_out = k->N, .k_in = k->K};
    if (sd_cuda_gemm_skinny(&g, s, &eb) != SPECDEC_OK) {
        fprintf(stderr, "bench: %s\n", eb.msg);
        exit(1);
    }
}
static void run_simt(void *c, cudaStream_t s) { /* the CUDA-core kernel, the pre-tensor-core baseline */
    gemm_ctx *k = c;
    sd_errbuf eb;
    const sd_cuda_gemm_args g = {
        .w = k->w, .wdt = SD_BF16, .bias = NULL, .x = k->x, .y = k->y, .ldy = k->N, .n = k->M, .n_out = k->N, .k_in = k->K};
    if (sd_cuda_gemm_simt(&g, s, &eb) != SPECDEC_OK) {
        fprintf(stderr, "bench: %s\n", eb.msg);
        exit(1);
    }
}
static void run_cublas(void *c, cudaStream_t s) {
    gemm_ctx *k = c;
    const float alpha = 1.0f, beta = 0.0f;
    (void)s;
    if (cublasGemmEx(k->blas, CUBLAS_OP_T, CUBLAS_OP_N, k->N, k->M, k->K, &alpha, k->w, CUDA_R_16BF, k->K, k->xc,
                     CUDA_R_16BF, k->K, &beta, k->y, CUDA_R_32F, k->N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) !=
        CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "bench: cublasGemmEx failed\n");
        exit(1);
    }
}

/* The M-looped kernel (sd_cuda_gemm_tcb: x rounded into the scratch, then one launch per
 * 512 rows reading every weight once); its time includes the rounding pass. */
static void run_tcb(void *c, cudaStream_t s) {
    gemm_ctx *k = c;
    sd_errbuf eb;
    const sd_cuda_gemm_args g = {.w = k->w, .wdt = SD_BF16, .bias = NULL, .x = k->x, .y = k->y, .ldy = k->N, .n = k->M,
                                 .n_out = k->N, .k_in = k->K, .xconv = k->xt};
    if (sd_cuda_gemm_tcb(&g, s, &eb) != SPECDEC_OK) {
        fprintf(stderr, "bench: %s\n", eb.msg);
        exit(1);
    }
}

/* Validation before timing: the M-looped kernel's rows bitwise equal to the 16-row
 * kernel's (launches of 16 rows, no scratch) on the bench's data. */
static int gemm_tcb_bitwise(gemm_ctx *k, cudaStream_t s) {
    const size_t bytes = sizeof(float) * (size_t)k->M * k->N;
    float *a = malloc(bytes), *b = malloc(bytes);
    run_tcb(k, s);
    CK(cudaMemcpyAsync(a, k->y, bytes, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    run_skinny(k, s);
    CK(cudaMemcpyAsync(b, k->y, bytes, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    const int same = a && b && memcmp(a, b, bytes) == 0;
    free(a);
    free(b);
    return same;
}

/* Row counts of the GEMM comparison: every M of the 16-row kernel, then batched passes. */
static const int k_gemm_ms[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 24, 32, 48, 64, 128, 256};
#define N_GEMM_MS ((int)(sizeof k_gemm_ms / sizeof k_gemm_ms[0]))
#define GEMM_MAX_M 256

typedef struct gemm_sums {
    double skinny, tcb, blas, simt, worst_tcb; /* worst: tcb / cuBLAS */
    int worst_m, worst_s, all_bitwise;
} gemm_sums;

/* One shape: every M, JSON entries; returns nothing, accumulates into sums. */
static void bench_gemm_shape(gemm_ctx *gc, const char *op, int si, FILE *js, int *gfirst, double ceil_gbs,
                             gemm_sums *sm, cudaStream_t s0) {
    double frac_tcb[N_GEMM_MS], frac_blas[N_GEMM_MS];
    for (int mi = 0; mi < N_GEMM_MS; mi++) {
        gc->M = k_gemm_ms[mi];
        const int same = gemm_tcb_bitwise(gc, s0);
        const float ts = time_ms(run_skinny, gc, s0), tt = time_ms(run_tcb, gc, s0), tb = time_ms(run_cublas, gc, s0);
        const float tsimt = gc->M <= 16 ? time_ms(run_simt, gc, s0) : -1.0f; /* 16-row launches above: not timed */
        const double wgb = (double)gc->N * gc->K * 2 / 1e9; /* weights, the bytes a pass must stream */
        sm->all_bitwise &= same;
        if (gc->M <= 16) {
            sm->skinny += ts;
            sm->simt += tsimt;
        }
        sm->tcb += tt;
        sm->blas += tb;
        if (tt / tb > sm->worst_tcb) { sm->worst_tcb = tt / tb; sm->worst_m = gc->M; sm->worst_s = si; }
        fprintf(js, "%s\n       {\"op\": \"%s\", \"N\": %d, \"K\": %d, \"M\": %d, \"skinny_ms\": %.4f, \"tcb_ms\": %.4f, "
                    "\"cublas_ms\": %.4f, \"simt_ms\": %.4f, \"skinny_GBps\": %.1f, \"tcb_GBps\": %.1f, "
                    "\"skinny_frac_ceiling\": %.3f, \"tcb_frac_ceiling\": %.3f, \"cublas_frac_ceiling\": %.3f, "
                    "\"tcb_bitwise_skinny\": %d}",
                *gfirst ? "" : ",", op, gc->N, gc->K, gc->M, ts, tt, tb, tsimt, wgb / (ts * 1e-3), wgb / (tt * 1e-3),
                wgb / (ts * 1e-3) / ceil_gbs, wgb / (tt * 1e-3) / ceil_gbs, wgb / (tb * 1e-3) / ceil_gbs, same);
        *gfirst = 0;
        frac_tcb[mi] = wgb / (tt * 1e-3) / ceil_gbs;
        frac_blas[mi] = wgb / (tb * 1e-3) / ceil_gbs;
    }
    printf("  %-8s N=%-6d K=%-6d weight stream / copy ceiling, M-looped (cuBLAS):", op, gc->N, gc->K);
    for (int mi = 0; mi < N_GEMM_MS; mi++)
        if (k_gemm_ms[mi] == 1 || k_gemm_ms[mi] == 16 || k_gemm_ms[mi] >= 32)
            printf(" M%d %.0f%% (%.0f%%)", k_gemm_ms[mi], 100 * frac_tcb[mi], 100 * frac_blas[mi]);
    printf("\n");
}

/* The projection GEMMs of a model: the 16-row tensor-core kernel ("skinny": one launch
 * up to 16 rows, launches of 16 rows above), the M-looped kernel (tcb), cublasGemmEx
 * (BF16 activations converted beforehand, not timed) and the CUDA-core baseline (M <=
 * 16), for M in k_gemm_ms; weight bytes / time as a fraction of the copy ceiling of
 * this run. Appends the JSON entries and a table line; returns the table's length. */
static int bench_gemms(const sd_config *cfg, const char *name, FILE *js, char *table, size_t room, double ceil_gbs,
                       cudaStream_t s0) {
    const int qkv = (cfg->n_heads + 2 * cfg->n_kv_heads) * cfg->head_dim;
    const int shapes[5][2] = {{qkv, cfg->hidden_size}, {cfg->hidden_size, cfg->n_heads * cfg->head_dim},
                              {2 * cfg->intermediate_size, cfg->hidden_size}, {cfg->hidden_size, cfg->intermediate_size},
                              {cfg->vocab_size, cfg->hidden_size}};
    const char *snames[5] = {"qkv", "o", "gate_up", "down", "lm_head"};
    cublasHandle_t blas;
    if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) { fprintf(stderr, "cublasCreate failed\n"); exit(1); }
    cublasSetStream(blas, s0);
    int gfirst = 1;
    gemm_sums sm = {0, 0, 0, 0, 0, 0, 0, 1};
    sd_errbuf eb;
    for (int si = 0; si < 5; si++) {
        const int N = shapes[si][0], K = shapes[si][1];
        void *w, *xc, *xt;
        float *x, *y;
        CK(cudaMalloc(&w, (size_t)N * K * 2));
        CK(cudaMalloc((void **)&x, (size_t)GEMM_MAX_M * K * 4));
        CK(cudaMalloc((void **)&y, (size_t)GEMM_MAX_M * N * 4));
        CK(cudaMalloc(&xc, (size_t)GEMM_MAX_M * K * 2));
        CK(cudaMalloc(&xt, (size_t)GEMM_MAX_M * K * 2));
        if (sd_cuda_fill_normal(w, SD_BF16, (size_t)N * K, 7 + si, 0.0f, 0.02f, s0, &eb) != SPECDEC_OK ||
            sd_cuda_fill_normal(x, SD_F32, (size_t)GEMM_MAX_M * K, 99 + si, 0.0f, 1.0f, s0, &eb) != SPECDEC_OK ||
            sd_cuda_convert_f32(x, xc, SD_BF16, (size_t)GEMM_MAX_M * K, s0, &eb) != SPECDEC_OK) {
            fprintf(stderr, "bench: %s\n", eb.msg);
            exit(1);
        }
        gemm_ctx gc = {w, x, y, xc, xt, 1, N, K, blas};
        bench_gemm_shape(&gc, snames[si], si, js, &gfirst, ceil_gbs, &sm, s0);
        CK(cudaFree(w)); CK(cudaFree(x)); CK(cudaFree(y)); CK(cudaFree(xc)); CK(cudaFree(xt));
    }
    cublasDestroy(blas);
    return snprintf(table, room,
                    "%-15s gemm M=1..16, 5 shapes: skinny (tensor core) %.3f ms, CUDA-core %.3f ms (sums); all M: "
                    "M-looped %.3f ms, cuBLAS %.3f ms (sums); worst M-looped/cuBLAS %.2f (%s M=%d); M-looped == "
                    "skinny bitwise: %s\n",
                    name, sm.skinny, sm.simt, sm.tcb, sm.blas, sm.worst_tcb, snames[sm.worst_s], sm.worst_m,
                    sm.all_bitwise ? "yes" : "NO");
}

static sd_config make_cfg(const bench_model *m) {
    sd_config c;
    memset(&c, 0, sizeof c);
    c.arch = m->bias ? SD_ARCH_QWEN2 : SD_ARCH_LLAMA;
    snprintf(c.architecture, sizeof c.architecture, "%s", m->bias ? "Qwen2ForCausalLM" : "LlamaForCausalLM");
    c.vocab_size = m->vocab; c.hidden_size = m->hidden; c.intermediate_size = m->inter; c.n_layers = m->layers;
    c.n_heads = m->heads; c.n_kv_heads = m->kv_heads; c.head_dim = m->head_dim; c.max_position_embeddings = 131072;
    c.rms_norm_eps = 1e-5f; c.rope_theta = m->theta; c.tie_word_embeddings = m->tied; c.attention_bias = m->bias;
    c.bos_id = -1;
    if (m->llama3) {
        c.rope_type = SD_ROPE_LLAMA3; c.rope_factor = 32.0f; c.rope_low_freq_factor = 1.0f;
        c.rope_high_freq_factor = 4.0f; c.rope_original_max_pos = 8192;
    }
    return c;
}

int main(int argc, char **argv) {
    const char *out = "bench_cuda.json", *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--models") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) g_reps = atoi(argv[++i]);
    }
    if (specdec_cuda_device_count() <= 0) {
        printf("skipped: no CUDA device\n");
        return 77;
    }
    struct cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    CK(cudaEventCreate(&g_e0));
    CK(cudaEventCreate(&g_e1));
    cudaStream_t s0;
    CK(cudaStreamCreate(&s0));
    FILE *js = fopen(out, "w");
    if (!js) { fprintf(stderr, "bench: cannot write %s\n", out); return 1; }
    char date[32];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));

    /* 1. the ceiling: a 2 GiB device-to-device copy (read + write counted) */
    copy_ctx cc = {NULL, NULL, (size_t)1 << 31};
    CK(cudaMalloc(&cc.dst, cc.bytes));
    CK(cudaMalloc(&cc.src, cc.bytes));
    CK(cudaMemset(cc.src, 1, cc.bytes));
    float t_copy = time_ms(run_copy, &cc, s0);
    const double ceil_gbs = 2.0 * (double)cc.bytes / (t_copy * 1e-3) / 1e9;
    CK(cudaFree(cc.dst));
    CK(cudaFree(cc.src));
    fprintf(js, "{\n  \"gpu\": \"%s\", \"sm\": %d, \"date\": \"%s\", \"reps\": %d,\n  \"d2d_copy_GBps\": %.1f,\n  \"models\": [\n",
            prop.name, prop.major * 10 + prop.minor, date, g_reps, ceil_gbs);
    printf("GPU %s, d2d copy %.1f GB/s (read+write)\n", prop.name, ceil_gbs);

    char table[16384];
    int tl = snprintf(table, sizeof table, "%-15s %5s %3s %9s %8s %7s %9s\n", "model", "ctx", "M", "ms/step", "GB/s",
                      "%ceil", "graph_ms");
    const int Ms[] = {1, 2, 4, 5, 8, 16};
    const int ctxs[] = {512, 4096};
    int first_model = 1;
    for (size_t mi = 0; mi < sizeof k_models / sizeof k_models[0]; mi++) {
        const bench_model *bm = &k_models[mi];
        if (only && !strstr(only, bm->name)) continue;
        sd_config cfg = make_cfg(bm);
        sd_runner *r = NULL;
        sd_errbuf eb;
        const int n_ctx = 4096 + 32;
        if (sd_cuda_runner_create_synthetic(&cfg, SD_BF16, n_ctx, 512, 0, 42 + mi, &r, &eb) != SPECDEC_OK) {
            fprintf(stderr, "bench: %s: %s\n", bm->name, eb.msg);
            return 1;
        }
        cudaStream_t rs = sd_cuda_runner_stream(r);
        const size_t wbytes = sd_cuda_runner_weight_bytes(r), kvtok = sd_cuda_runner_kv_bytes_per_token(r);
        int32_t *htok = malloc(sizeof(int32_t) * 512);
        for (int i = 0; i < 512; i++) htok[i] = (int32_t)((i * 7919u + 13u) % (unsigned)cfg.vocab_size);

        /* validate before timing */
        float *lg = malloc(sizeof(float) * 5 * cfg.vocab_size), *l1 = malloc(sizeof(float) * cfg.vocab_size);
        int valid = sd_runner_forward(r, htok, 16, 0, NULL) == SPECDEC_OK;
        valid = valid && sd_runner_forward(r, htok + 16, 5, 16, lg) == SPECDEC_OK;
        valid = valid && sd_runner_forward(r, htok + 16, 1, 16, l1) == SPECDEC_OK;
        int finite = 1;
        for (int i = 0; i < 5 * cfg.vocab_size; i++) finite &= isfinite(lg[i]) != 0;
        const int invariant = valid && memcmp(lg, l1, sizeof(float) * cfg.vocab_size) == 0;
        printf("%s: weights %.2f GB, validation: forward %s, logits finite %s, batch-invariant %s\n", bm->name,
               wbytes / 1e9, valid ? "ok" : "FAILED", finite ? "yes" : "NO", invariant ? "yes" : "NO");
        CK(cudaMemcpy(sd_cuda_runner_device_tokens(r), htok, sizeof(int32_t) * 512, cudaMemcpyHostToDevice));

        fprintf(js, "%s    {\"name\": \"%s\", \"weight_bytes\": %zu, \"kv_bytes_per_token\": %zu, \"valid\": %d, "
                    "\"finite\": %d, \"batch_invariant\": %d,\n     \"steps\": [",
                first_model ? "" : ",\n", bm->name, wbytes, kvtok, valid, finite, invariant);
        first_model = 0;
        int first = 1;
        float t_m1[2] = {0, 0}, t_m5[2] = {0, 0};
        for (int ci = 0; ci < 2; ci++) {
            for (size_t k = 0; k < sizeof Ms / sizeof Ms[0]; k++) {
                step_ctx sc = {r, Ms[k], ctxs[ci]};
                float t = time_ms(run_step, &sc, rs);
                const double bytes = (double)wbytes + (double)kvtok * (ctxs[ci] + Ms[k]);
                const double gbs = bytes / (t * 1e-3) / 1e9;
                float tg = -1.0f;
                if (Ms[k] == 1 || Ms[k] == 5) {
                    cudaGraph_t g;
                    graph_ctx gc;
                    CK(cudaStreamBeginCapture(rs, cudaStreamCaptureModeThreadLocal));
                    run_step(&sc, rs);
                    CK(cudaStreamEndCapture(rs, &g));
                    CK(cudaGraphInstantiate(&gc.g, g, 0));
                    tg = time_ms(run_graph, &gc, rs);
                    CK(cudaGraphExecDestroy(gc.g));
                    CK(cudaGraphDestroy(g));
                }
                if (Ms[k] == 1) t_m1[ci] = t;
                if (Ms[k] == 5) t_m5[ci] = t;
                fprintf(js, "%s\n       {\"ctx\": %d, \"M\": %d, \"ms\": %.4f, \"GBps\": %.1f, \"frac_ceiling\": %.3f, "
                            "\"graph_ms\": %.4f}",
                        first ? "" : ",", ctxs[ci], Ms[k], t, gbs, gbs / ceil_gbs, tg);
                first = 0;
                tl += snprintf(table + tl, sizeof table - tl, "%-15s %5d %3d %9.3f %8.1f %6.1f%% %9.3f\n", bm->name,
                               ctxs[ci], Ms[k], t, gbs, 100.0 * gbs / ceil_gbs, tg);
            }
        }
        step_ctx pc = {r, 512, 0};
        const float t_pre = time_ms(run_step, &pc, rs);
        fprintf(js, "],\n     \"prefill512_ms\": %.3f, \"m5_over_m1\": [%.3f, %.3f],\n     \"gemm\": [", t_pre,
                t_m5[0] / t_m1[0], t_m5[1] / t_m1[1]);
        tl += snprintf(table + tl, sizeof table - tl, "%-15s prefill512 %.2f ms (%.0f tok/s); M5/M1 %.2f (ctx512) %.2f (ctx4096)\n",
                       bm->name, t_pre, 512.0 / (t_pre * 1e-3), t_m5[0] / t_m1[0], t_m5[1] / t_m1[1]);

        tl += bench_gemms(&cfg, bm->name, js, table + tl, sizeof table - (size_t)tl, ceil_gbs, s0);
        fprintf(js, "]}");
        free(htok); free(lg); free(l1);
        sd_runner_destroy(r);
    }
    fprintf(js, "\n  ]\n}\n");
    fclose(js);
    printf("\n%s", table);
    printf("copy ceiling %.1f GB/s; JSON: %s\n", ceil_gbs, out);
    return 0;
}
