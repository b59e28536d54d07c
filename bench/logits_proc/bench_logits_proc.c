/* bench_logits_proc.c — what the logits processors (docs/SAMPLING.md) add to a row: the time of
 * sd_cpu_logits_proc (8 logit_bias entries, repetition 1.1, frequency 0.5, presence 0.5; each row
 * recounts its history) for histories of 256 to 16 384 tokens (half prompt, half generated,
 * ids drawn from the vocabulary's first 8 192 so that repeats occur), against sd_sampling_process
 * of the same row (T 0.8, top-k 40, top-p 0.95, min-p 0.05) measured in the same run, for the
 * bundled target's V = 4096 and Qwen2's V = 152064. Per row, medians of `repeats` runs.
 * Usage: bench_logits_proc [repeats 1..16]  (not run by ctest; results in bench/results/). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "sd_cpu_logits_proc.h"
#include "sd_cpu_sample.h"

int main(int argc, char **argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 5;
    if (reps < 1 || reps > 16) {
        fprintf(stderr, "usage: bench_logits_proc [repeats 1..16]\n");
        return 2;
    }
    const int32_t Vs[2] = {4096, 152064}, Ns[3] = {256, 4096, 16384};
    const sd_sampling_params sp = {0.8f, 40, 0.95f, 0.05f};
    specdec_logit_bias bias[8];
    for (int i = 0; i < 8; i++) bias[i] = (specdec_logit_bias){i * 37, (float)(i - 4)};
    printf("| V | history | sd_cpu_logits_proc us/row | sd_sampling_process us/row | ratio |\n|---|---|---|---|---|\n");
    for (int v = 0; v < 2; v++) {
        const int32_t V = Vs[v];
        float *x = malloc((size_t)V * sizeof *x), *p = malloc((size_t)V * sizeof *p);
        int32_t *counts = calloc((size_t)V, sizeof *counts), *list = malloc((size_t)V * sizeof *list);
        int32_t *hist = malloc((size_t)Ns[2] * sizeof *hist);
        const size_t ss = sd_sampling_scratch_size(V);
        void *scratch = malloc(ss);
        if (!x || !p || !counts || !list || !hist || !scratch) return 1;
        unsigned s = 11;
        for (int32_t i = 0; i < V; i++) {
            s = s * 1103515245u + 12345u;
            x[i] = (float)((s >> 8) % 2000) / 200.0f - 5.0f;
        }
        for (int32_t i = 0; i < Ns[2]; i++) {
            s = s * 1103515245u + 12345u;
            hist[i] = (int32_t)((s >> 8) % (V < 8192 ? (unsigned)V : 8192u));
        }
        const int rows = V > 10000 ? 20 : 200;
        double tproc[16], tsamp[16];
        volatile double sink = 0;
        for (int r = 0; r < reps; r++) { /* the sampler's row: once per V */
            const double t0 = bench_now_s();
            for (int k = 0; k < rows; k++) {
                if (sd_sampling_process(x, V, &sp, scratch, ss, p, NULL) != SPECDEC_OK) return 1;
                sink += p[k % V];
            }
            tsamp[r] = (bench_now_s() - t0) / rows * 1e6;
        }
        const double samp = bench_median(tsamp, reps);
        for (int h = 0; h < 3; h++) {
            const int32_t n = Ns[h];
            sd_logits_proc lp;
            memset(&lp, 0, sizeof lp);
            lp.bias = bias;
            lp.n_bias = 8;
            lp.repetition = 1.1f;
            lp.frequency = 0.5f;
            lp.presence = 0.5f;
            lp.n_prompt = n / 2;
            for (int r = 0; r < reps; r++) {
                const double t0 = bench_now_s();
                for (int k = 0; k < rows; k++) { /* a round's row k % 5: 0..4 drafts before it */
                    sd_cpu_logits_proc(&lp, x, V, hist, n - k % 5, hist + n - k % 5, k % 5, counts, list);
                    sink += x[k % V];
                }
                tproc[r] = (bench_now_s() - t0) / rows * 1e6;
            }
            const double proc = bench_median(tproc, reps);
            printf("| %d | %d | %.1f | %.1f | %.2f |\n", (int)V, (int)n, proc, samp, proc / samp);
        }
        (void)sink;
        free(x), free(p), free(counts), free(list), free(hist), free(scratch);
    }
    printf("\nThe processors run in place on one row again and again (its values drift; the work per call\n"
           "does not depend on them). Both columns: this machine, this run.\n");
    return 0;
}
