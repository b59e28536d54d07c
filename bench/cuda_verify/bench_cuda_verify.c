/* bench_cuda_verify.c — time of the fused verify kernel (sd_cuda_sample_verify) for
 * V in {4096, 32000, 128256, 151936} and gamma 1..8, one sequence, REJECTION mode with
 * T = 1 (no top-k / top-p: the common serving setting) plus a top-k 50 + top-p 0.9 row
 * at gamma 4 and a GREEDY row at gamma 4.
 * Validates before timing: the launch succeeds, n in [0, gamma], every emitted id in
 * [0, V). Warm-up 10 launches, then 50 timed launches each bracketed by CUDA events;
 * reports the median and min. Ceiling measured in the same run: an in-SM copy of one
 * (gamma+1) x V fp32 block (one launch, device-to-device memcpy of the logits), i.e.
 * the time just to move the rows once. Goal (issue): <= 20 us at V = 128256, gamma 4.
 * Output: a table on stdout and JSON to argv[1] (default bench_cuda_verify.json).
 * Skips (exit 77) without a device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "specdec.h"

#ifndef SPECDEC_WITH_CUDA
int main(void) {
    printf("skipped: no CUDA device\n");
    return 77;
}
#else
#include <cuda_runtime_api.h>

#include "sd_cuda_sample.h"

static int cmp_f(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

enum { WARM = 10, REPS = 50 };

typedef struct {
    int V, g;
    const char *what;
    float med_us, min_us, copy_us;
} result;

static int run(int V, int g, specdec_verify_mode mode, sd_sampling_params sp, result *res) {
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
    qsort(t, REPS, sizeof(float), cmp_f);
    qsort(c, REPS, sizeof(float), cmp_f);
    res->V = V;
    res->g = g;
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
    result res[64];
    int nr = 0, fails = 0;
    const sd_sampling_params plain = {1.0f, 0, 1.0f, 0.0f}, filt = {1.0f, 50, 0.9f, 0.0f}, greedy = {0.0f, 0, 1.0f, 0.0f};
    printf("%-28s %7s %5s %10s %10s %12s\n", "config", "V", "gamma", "median_us", "min_us", "copy_us");
    for (int vi = 0; vi < 4; vi++) {
        for (int g = 1; g <= 10; g++) {
            sd_sampling_params sp = plain;
            specdec_verify_mode mode = SPECDEC_VERIFY_REJECTION;
            int gg = g;
            const char *what = "rejection T=1";
            if (g == 9) { gg = 4; sp = filt; what = "rejection top-k 50 top-p 0.9"; }
            if (g == 10) { gg = 4; sp = greedy; mode = SPECDEC_VERIFY_GREEDY; what = "greedy"; }
            result *r = &res[nr];
            if (!run(Vs[vi], gg, mode, sp, r)) { fails++; continue; }
            r->what = what;
            printf("%-28s %7d %5d %10.2f %10.2f %12.2f%s\n", what, r->V, r->g, r->med_us, r->min_us, r->copy_us,
                   (r->V == 128256 && r->g == 4 && g == 4) ? (r->med_us <= 20.0f ? "  (goal 20 us: met)" : "  (goal 20 us: MISSED)") : "");
            nr++;
        }
    }
    FILE *f = fopen(json, "w");
    if (f) {
        fprintf(f, "{\n  \"bench\": \"cuda_sample_verify\",\n  \"unit\": \"us\",\n  \"warmup\": %d,\n  \"reps\": %d,\n  \"results\": [\n", WARM, REPS);
        for (int i = 0; i < nr; i++)
            fprintf(f, "    {\"config\": \"%s\", \"V\": %d, \"gamma\": %d, \"median_us\": %.3f, \"min_us\": %.3f, \"copy_ceiling_us\": %.3f}%s\n",
                    res[i].what, res[i].V, res[i].g, res[i].med_us, res[i].min_us, res[i].copy_us, i + 1 < nr ? "," : "");
        fprintf(f, "  ]\n}\n");
        fclose(f);
        printf("wrote %s\n", json);
    }
    return fails ? 1 : 0;
}
#endif
