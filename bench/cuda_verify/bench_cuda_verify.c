/* bench_cuda_verify.c — time of the fused verify kernel (sd_cuda_sample_verify) for
 * V in {4096, 32000, 128256, 151936} and gamma 1..8, one sequence, REJECTION mode with
 * T = 1 (no top-k / top-p: the common serving setting) plus a top-k 50 + top-p 0.9 row
 * at gamma 4 and a GREEDY row at gamma 4.
 * Validates before timing: the launch succeeds, n in [0, gamma], every emitted id in
 * [0, V). Warm-up 10 launches, then 50 timed launches each bracketed by CUDA events;
 * reports the median and min. Ceiling measured in the same run: an in-SM copy of one
 * (gamma+1) x V fp32 block (one launch, device-to-device memcpy of the logits), i.e.
 * the time just to move the rows once. Goal (issue): <= 20 us at V = 128256, gamma 4.
 * Every configuration runs twice: the one-block kernel and the multi-block one
 * (blocks_per_row = SD_CUDA_MB_AUTO); plus the draft sampling step (REJECTION, T = 1).
 * Targets (issue 12, multi-block, gamma 4, V = 128256 / 151936): rejection T=1 <= 20 us,
 * top-k 50 + top-p 0.9 <= 40 us, greedy <= 10 us, draft sampling <= 8 us; V = 4096 <= 8 us;
 * each JSON record carries target_us and met.
 * Output: a table on stdout and JSON to argv[1] (default bench_cuda_verify.json).
 * Skips (exit 77) without a device. */
#define _POSIX_C_SOURCE 200809L /* bench_util.h: clock_gettime */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "specdec.h"

#ifndef SPECDEC_WITH_CUDA
int main(void) {
    printf("skipped: no CUDA device\n");
    return 77;
}
#else
#include <cuda_runtime_api.h>

#include "sd_cuda_sample.h"

enum { WARM = 10, REPS = 50 };

typedef struct {
    int V, g, bpr;
    const char *what;
    float med_us, min_us, copy_us, target_us; /* target 0: none */
} result;

/* The targets (multi-block variant): V = 128256 / 151936 at gamma 4, V = 4096. */
static float target_of(const char *what, int V, int g, int bpr) {
    if (bpr == 0 || (g != 4 && g != 0)) return 0.0f;
    if (V == 4096) return 8.0f;
    if (V != 128256 && V != 151936) return 0.0f;
    if (!strcmp(what, "rejection T=1")) return 20.0f;
    if (!strcmp(what, "rejection top-k 50 top-p 0.9")) return 40.0f;
    if (!strcmp(what, "greedy")) return 10.0f;
    if (!strcmp(what, "draft sampling T=1")) return 8.0f;
    return 0.0f;
}

static float median_us(float *t) {
    qsort(t, REPS, sizeof(float), bench_cmp_float);
    return t[REPS / 2] * 1000.0f;
}

/* One draft sampling step (REJECTION, T = 1), 1 sequence; gamma reported as 0. */
static int run_draft(int V, int bpr, result *res) {
    float *h = malloc(sizeof(float) * (size_t)V), *dl, *dq, t[REPS];
    for (int i = 0; i < V; i++) h[i] = (float)((i * 2654435761u) % 16000u) / 1000.0f - 8.0f;
    int32_t *dtok;
    uint64_t *dseed;
    int64_t *dpos;
    void *ws;
    const size_t wsb = sd_cuda_sample_ws_bytes(1, V);
    if (cudaMalloc((void **)&dl, sizeof(float) * V) || cudaMalloc((void **)&dq, sizeof(float) * V) ||
        cudaMalloc((void **)&dtok, 4) || cudaMalloc((void **)&dseed, 16) || cudaMalloc((void **)&dpos, 8) ||
        cudaMalloc(&ws, wsb))
        return 0;
    cudaMemcpy(dl, h, sizeof(float) * V, cudaMemcpyHostToDevice);
    cudaMemset(dseed, 0, 16);
    cudaMemset(dpos, 0, 8);
    sd_errbuf eb = {{0}};
    sd_cuda_sample_ws_init(ws, wsb, 0, &eb);
    const sd_cuda_sample_draft_args da = {.logits = dl, .ld_logits = V, .n_seq = 1, .n_vocab = V,
                                          .sp = {1.0f, 0, 1.0f, 0.0f}, .mode = SPECDEC_VERIFY_REJECTION,
                                          .seed = dseed, .seq_id = dseed + 1, .position = dpos, .q_out = dq,
                                          .ld_q = V, .tok_out = dtok, .tok_stride = 1, .blocks_per_row = bpr};
    int32_t tok = -1;
    int ok = sd_cuda_sample_draft_step(&da, ws, wsb, 0, &eb) == SPECDEC_OK && cudaDeviceSynchronize() == cudaSuccess;
    cudaMemcpy(&tok, dtok, 4, cudaMemcpyDeviceToHost);
    if (!ok || tok < 0 || tok >= V) {
        fprintf(stderr, "draft validation failed V=%d: %s\n", V, eb.msg);
        return 0;
    }
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    for (int i = 0; i < WARM; i++) sd_cuda_sample_draft_step(&da, ws, wsb, 0, &eb);
    for (int i = 0; i < REPS; i++) {
        cudaEventRecord(e0, 0);
        sd_cuda_sample_draft_step(&da, ws, wsb, 0, &eb);
        cudaEventRecord(e1, 0);
        cudaEventSynchronize(e1);
        cudaEventElapsedTime(&t[i], e0, e1);
    }
    res->V = V, res->g = 0, res->bpr = bpr, res->min_us = 0.0f;
    res->med_us = median_us(t);
    res->min_us = t[0] * 1000.0f;
    res->copy_us = 0.0f;
    cudaEventDestroy(e0); cudaEventDestroy(e1);
    cudaFree(dl); cudaFree(dq); cudaFree(dtok); cudaFree(dseed); cudaFree(dpos); cudaFree(ws);
    free(h);
    return cudaGetLastError() == cudaSuccess;
}

static int run(int V, int g, specdec_verify_mode mode, sd_sampling_params sp, int bpr, result *res) {
    const int R = g + 1;
    float *h = malloc(sizeof(float) * (size_t)R * V);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < (size_t)R * V; i++) { /* xorshift logits in [-8, 8) */
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        h[i] = (float)((double)(x >> 11) / 9007199254740992.0 * 16.0 - 8.0);
    }
    float *dl, *dq, *dcopy;
    int32_t *ddraft, *dout, *dn;
    uint64_t *dseed, *dsid;
    int64_t *dpos;
    void *ws;
    size_t wsb = sd_cuda_verify_ws_bytes(1, g, V);
    if (cudaMalloc((void **)&dl, sizeof(float) * (size_t)R * V) || cudaMalloc((void **)&dq, sizeof(float) * (size_t)R * V) ||
        cudaMalloc((void **)&dcopy, sizeof(float) * (size_t)R * V) || cudaMalloc((void **)&ddraft, 64 * 4) ||
        cudaMalloc((void **)&dout, 64 * 4) || cudaMalloc((void **)&dn, 4) || cudaMalloc((void **)&dseed, 8) ||
        cudaMalloc((void **)&dsid, 8) || cudaMalloc((void **)&dpos, 8) || cudaMalloc(&ws, wsb)) {
        fprintf(stderr, "cudaMalloc failed\n");
        return 0;
    }
    cudaMemcpy(dl, h, sizeof(float) * (size_t)R * V, cudaMemcpyHostToDevice);
    sd_sampling_params qsp = {1.0f, 0, 1.0f, 0.0f};
    sd_errbuf eb = {{0}};
    void *pws;
    size_t pwsb = sd_cuda_sample_ws_bytes(R, V);
    cudaMalloc(&pws, pwsb);
    const sd_cuda_sample_rows_args ra = {.logits = dl, .ld_in = V, .n_rows = R, .n_vocab = V, .sp = qsp, .probs = dq, .ld_out = V};
    sd_cuda_sample_process_rows(&ra, pws, pwsb, 0, &eb); /* q = p: high acceptance */
    int32_t draft[16];
    for (int i = 0; i < 16; i++) draft[i] = (i * 7919) % V;
    cudaMemcpy(ddraft, draft, sizeof draft, cudaMemcpyHostToDevice);
    uint64_t seed = 1234, sid = 0;
    int64_t pos = 100;
    cudaMemcpy(dseed, &seed, 8, cudaMemcpyHostToDevice);
    cudaMemcpy(dsid, &sid, 8, cudaMemcpyHostToDevice);
    cudaMemcpy(dpos, &pos, 8, cudaMemcpyHostToDevice);
    sd_cuda_verify_ws_init(ws, wsb, 0, &eb);
    sd_cuda_verify_args a;
    memset(&a, 0, sizeof a);
    a.mode = mode; a.gamma = g; a.n_vocab = V; a.n_seq = 1; a.sp = sp;
    a.logits = dl; a.ld_logits = V; a.logits_seq_stride = (int64_t)R * V;
    a.q = dq; a.ld_q = V; a.q_seq_stride = (int64_t)R * V;
    a.draft = ddraft; a.draft_stride = 16;
    a.seed = dseed; a.seq_id = dsid; a.pos0 = dpos;
    a.out_tokens = dout; a.out_stride = 17; a.out_n_accepted = dn;
    a.blocks_per_row = bpr;
    /* validate */
    int ok = sd_cuda_verify(&a, ws, wsb, 0, &eb) == SPECDEC_OK && cudaDeviceSynchronize() == cudaSuccess;
    int32_t n = -1, out[17];
    cudaMemcpy(&n, dn, 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost);
    ok = ok && n >= 0 && n <= g;
    for (int i = 0; ok && i <= n; i++) ok = out[i] >= 0 && out[i] < V;
    if (!ok) {
        fprintf(stderr, "validation failed V=%d gamma=%d: %s (n=%d)\n", V, g, eb.msg, n);
        return 0;
    }
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    float t[REPS], c[REPS];
    for (int i = 0; i < WARM; i++) sd_cuda_verify(&a, ws, wsb, 0, &eb);
    for (int i = 0; i < REPS; i++) {
        cudaEventRecord(e0, 0);
        sd_cuda_verify(&a, ws, wsb, 0, &eb);
        cudaEventRecord(e1, 0);
        cudaEventSynchronize(e1);
        cudaEventElapsedTime(&t[i], e0, e1);
    }
    for (int i = 0; i < WARM; i++) cudaMemcpyAsync(dcopy, dl, sizeof(float) * (size_t)R * V, cudaMemcpyDeviceToDevice, 0);
    for (int i = 0; i < REPS; i++) {
        cudaEventRecord(e0, 0);
        cudaMemcpyAsync(dcopy, dl, sizeof(float) * (size_t)R * V, cudaMemcpyDeviceToDevice, 0);
        cudaEventRecord(e1, 0);
        cudaEventSynchronize(e1);
        cudaEventElapsedTime(&c[i], e0, e1);
    }
    qsort(t, REPS, sizeof(float), bench_cmp_float);
    qsort(c, REPS, sizeof(float), bench_cmp_float);
    res->V = V;
    res->g = g;
    res->bpr = bpr;
    res->med_us = t[REPS / 2] * 1000.0f;
    res->min_us = t[0] * 1000.0f;
    res->copy_us = c[REPS / 2] * 1000.0f;
    cudaEventDestroy(e0); cudaEventDestroy(e1);
    cudaFree(dl); cudaFree(dq); cudaFree(dcopy); cudaFree(ddraft); cudaFree(dout); cudaFree(dn); cudaFree(dseed);
    cudaFree(dsid); cudaFree(dpos); cudaFree(ws); cudaFree(pws);
    free(h);
    return cudaGetLastError() == cudaSuccess;
}

int main(int argc, char **argv) {
    if (specdec_cuda_device_count() <= 0) {
        printf("skipped: no CUDA device\n");
        return 77;
    }
    const char *json = argc > 1 ? argv[1] : "bench_cuda_verify.json";
    const int Vs[4] = {4096, 32000, 128256, 151936};
    static result res[256];
    int nr = 0, fails = 0;
    const sd_sampling_params plain = {1.0f, 0, 1.0f, 0.0f}, filt = {1.0f, 50, 0.9f, 0.0f}, greedy = {0.0f, 0, 1.0f, 0.0f};
    printf("%-28s %-11s %7s %5s %10s %10s %10s %8s\n", "config", "variant", "V", "gamma", "median_us", "min_us", "copy_us",
           "target");
    for (int vi = 0; vi < 4; vi++)
        for (int var = 0; var < 2; var++) {
            const int bpr = var ? SD_CUDA_MB_AUTO : 0; /* one-block kernel, then the multi-block one */
            for (int g = 1; g <= 11; g++) {
                sd_sampling_params sp = plain;
                specdec_verify_mode mode = SPECDEC_VERIFY_REJECTION;
                int gg = g;
                const char *what = "rejection T=1";
                if (g == 9) { gg = 4; sp = filt; what = "rejection top-k 50 top-p 0.9"; }
                if (g == 10) { gg = 4; sp = greedy; mode = SPECDEC_VERIFY_GREEDY; what = "greedy"; }
                result *r = &res[nr];
                int ok = g == 11 ? run_draft(Vs[vi], bpr, r) : run(Vs[vi], gg, mode, sp, bpr, r);
                if (!ok) { fails++; continue; }
                r->what = g == 11 ? "draft sampling T=1" : what;
                r->target_us = target_of(r->what, r->V, r->g, bpr);
                printf("%-28s %-11s %7d %5d %10.2f %10.2f %10.2f %8.1f%s\n", r->what, bpr ? "multi-block" : "one-block",
                       r->V, r->g, r->med_us, r->min_us, r->copy_us, r->target_us,
                       r->target_us > 0 ? (r->med_us <= r->target_us ? "  met" : "  MISSED") : "");
                nr++;
            }
        }
    FILE *f = fopen(json, "w");
    if (f) {
        fprintf(f, "{\n  \"bench\": \"cuda_verify\",\n  \"unit\": \"us\",\n  \"warmup\": %d,\n  \"reps\": %d,\n  \"results\": [\n", WARM, REPS);
        for (int i = 0; i < nr; i++)
            fprintf(f, "    {\"config\": \"%s\", \"variant\": \"%s\", \"V\": %d, \"gamma\": %d, \"median_us\": %.3f, \"min_us\": %.3f, "
                       "\"copy_ceiling_us\": %.3f, \"target_us\": %.1f, \"met\": %s}%s\n",
                    res[i].what, res[i].bpr ? "multi-block" : "one-block", res[i].V, res[i].g, res[i].med_us,
                    res[i].min_us, res[i].copy_us, res[i].target_us,
                    res[i].target_us > 0 ? (res[i].med_us <= res[i].target_us ? "true" : "false") : "null",
                    i + 1 < nr ? "," : "");
        fprintf(f, "  ]\n}\n");
        fclose(f);
        printf("wrote %s\n", json);
    }
    return fails ? 1 : 0;
}
#endif
