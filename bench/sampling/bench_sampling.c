/* bench_sampling.c — the host sampler's row processing (sd_sampling_process, core/sd_sample_rules.h
 * steps 0-8, kernels/cpu/sd_cpu_sample.c) per vocabulary id, on synthetic rows of Gaussian logits
 * (sd 3), for the bundled target's V = 4096 and Qwen2's V = 152064, with vLLM-like defaults
 * (T 0.8, top-k 40, top-p 0.95, min-p 0.05) and with no filter (T 1). The floor measured in the
 * same run: one pass of libm exp() over the row in double (what any softmax pays).
 * Usage: bench_sampling [repeats]  (not run by ctest; results in bench/results/). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "sd_cpu_sample.h"

static float gauss(unsigned *s) {
    double u = 0;
    for (int i = 0; i < 12; i++) {
        *s = *s * 1103515245u + 12345u;
        u += (double)(*s >> 8) / 16777216.0;
    }
    return (float)((u - 6.0) * 3.0);
}

int main(int argc, char **argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 3;
    if (reps < 1 || reps > 16) { /* the arrays below hold 16 */
        fprintf(stderr, "usage: bench_sampling [repeats 1..16]\n");
        return 2;
    }
    const int32_t Vs[2] = {4096, 152064};
    const sd_sampling_params sps[2] = {{0.8f, 40, 0.95f, 0.05f}, {1.0f, 0, 1.0f, 0.0f}};
    const char *spn[2] = {"T 0.8, top-k 40, top-p 0.95, min-p 0.05", "T 1, no filter"};
    printf("| V | params | sd_sampling_process ns/id (median of %d) | exp() floor ns/id | ratio |\n|---|---|---|---|---|\n",
           reps);
    for (int v = 0; v < 2; v++) {
        const int32_t V = Vs[v];
        float *x = malloc((size_t)V * sizeof *x), *p = malloc((size_t)V * sizeof *p);
        const size_t ss = sd_sampling_scratch_size(V);
        void *scratch = malloc(ss);
        if (!x || !p || !scratch) return 1;
        unsigned seed = 7;
        for (int32_t i = 0; i < V; i++) x[i] = gauss(&seed);
        const int rows = V > 10000 ? 20 : 400;
        for (int s = 0; s < 2; s++) {
            double best[16], fl[16];
            volatile double sink = 0;
            for (int r = 0; r < reps && r < 16; r++) {
                double t0 = bench_now_s();
                for (int k = 0; k < rows; k++) {
                    x[k % V] += 1e-3f; /* not the same row every time */
                    if (sd_sampling_process(x, V, &sps[s], scratch, ss, p, NULL) != SPECDEC_OK) return 1;
                    sink += p[0];
                }
                best[r] = (bench_now_s() - t0) / rows / V * 1e9;
                t0 = bench_now_s();
                for (int k = 0; k < rows; k++) {
                    double acc = 0;
                    for (int32_t i = 0; i < V; i++) acc += exp((double)x[i] - 9.0);
                    sink += acc;
                }
                fl[r] = (bench_now_s() - t0) / rows / V * 1e9;
            }
            bench_sort(best, reps); /* medians: [reps / 2] */
            bench_sort(fl, reps);
            printf("| %d | %s | %.2f | %.2f | %.1f |\n", (int)V, spn[s], best[reps / 2], fl[reps / 2],
                   best[reps / 2] / fl[reps / 2]);
        }
        free(x), free(p), free(scratch);
    }
    return 0;
}
