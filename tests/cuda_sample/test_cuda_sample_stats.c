/* test_cuda_sample_stats.c — the statistical proof of SPECULATIVE.md run through the GPU
 * kernels: draft tokens from sd_cuda_sample_draft_step (cuRAND Philox, q kept on the
 * device, the token written straight into the round's draft list, positions advanced
 * on the device) and the round decided by sd_cuda_verify — no host work between.
 *
 * Setup: context-free synthetic models over V tokens (the same logits at a position for
 * every sample); sample s = sequence id s, seed fixed per case, one round of gamma draft
 * steps from position 0.
 * Hypotheses (H0), Pearson chi-square with pooling of bins with expectation < 5 (the
 * helpers of tests/verify/vstats.h), a token of probability 0 ever emitted = rejection:
 *  (a) the token emitted at position 0 is distributed as P[0] (processed target row);
 *  (b) the accepted count has P(n) = a_1...a_n (1 - a_{n+1}), a_i = sum_x min(P_i, Q_i)
 *      (REJECTION) or the overlap of the inverse-CDF partitions (MATCH).
 * Significance alpha = 1e-6 family-wise, Bonferroni over all tests of all cases.
 * Samples: --samples (default 1e6) per case.
 * Mutation check (--mutants): three broken setups must each be caught at the same alpha:
 *  q taken before processing (the verifier gets the raw softmax of the draft logits),
 *  q = 1 everywhere (acceptance r <= p(x) without q, residual = p), and the acceptance
 *  word of position 0 reused for every position (injected words).
 * Needs a GPU (skips otherwise). */
#include "sd_test.h"
#include "specdec.h"

#ifndef SPECDEC_WITH_CUDA
int main(void) { return sd_test_skip("no CUDA device"); }
#else
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "../verify/vstats.h"
#include "cs_common.h"
#include "sd_cuda_sample.h"
#include "sd_rng.h"

typedef enum { K_NOISY, K_SAME, K_DISJOINT, K_ONEHOT_P, K_SPECIAL } kind_t;
typedef struct {
    const char *name;
    specdec_verify_mode mode;
    int V, gamma;
    sd_sampling_params sp;
    kind_t kind;
} scase;

static const scase cases[] = {
    {"T=1", SPECDEC_VERIFY_REJECTION, 32, 4, {1.0f, 0, 1.0f, 0.0f}, K_NOISY},
    {"T=0.5", SPECDEC_VERIFY_REJECTION, 32, 4, {0.5f, 0, 1.0f, 0.0f}, K_NOISY},
    {"T=2", SPECDEC_VERIFY_REJECTION, 32, 4, {2.0f, 0, 1.0f, 0.0f}, K_NOISY},
    {"top-k 1", SPECDEC_VERIFY_REJECTION, 32, 4, {1.0f, 1, 1.0f, 0.0f}, K_NOISY},
    {"top-k 5", SPECDEC_VERIFY_REJECTION, 32, 4, {1.0f, 5, 1.0f, 0.0f}, K_NOISY},
    {"top-p 0.5", SPECDEC_VERIFY_REJECTION, 32, 4, {1.0f, 0, 0.5f, 0.0f}, K_NOISY},
    {"top-p 0.9", SPECDEC_VERIFY_REJECTION, 32, 4, {1.0f, 0, 0.9f, 0.0f}, K_NOISY},
    {"top-k 5 + top-p 0.9, T=0.7", SPECDEC_VERIFY_REJECTION, 32, 4, {0.7f, 5, 0.9f, 0.0f}, K_NOISY},
    {"top-k 10 + top-p 0.95 + min-p 0.05", SPECDEC_VERIFY_REJECTION, 48, 4, {0.8f, 10, 0.95f, 0.05f}, K_NOISY},
    {"q == p", SPECDEC_VERIFY_REJECTION, 32, 4, {1.0f, 0, 1.0f, 0.0f}, K_SAME},
    {"disjoint supports", SPECDEC_VERIFY_REJECTION, 32, 4, {1.0f, 0, 1.0f, 0.0f}, K_DISJOINT},
    {"one-hot p", SPECDEC_VERIFY_REJECTION, 32, 4, {1.0f, 0, 1.0f, 0.0f}, K_ONEHOT_P},
    {"NaN/Inf logits", SPECDEC_VERIFY_REJECTION, 32, 4, {1.0f, 0, 1.0f, 0.0f}, K_SPECIAL},
    {"V=61 (prime), gamma 3", SPECDEC_VERIFY_REJECTION, 61, 3, {0.8f, 0, 1.0f, 0.0f}, K_NOISY},
    {"V=16, gamma 8", SPECDEC_VERIFY_REJECTION, 16, 8, {1.0f, 0, 1.0f, 0.0f}, K_NOISY},
    {"V=64, gamma 1", SPECDEC_VERIFY_REJECTION, 64, 1, {1.0f, 0, 1.0f, 0.0f}, K_NOISY},
    {"match T=1", SPECDEC_VERIFY_MATCH, 32, 4, {1.0f, 0, 1.0f, 0.0f}, K_NOISY},
    {"match top-k 5 + top-p 0.9", SPECDEC_VERIFY_MATCH, 32, 4, {1.0f, 5, 0.9f, 0.0f}, K_NOISY},
};
enum { NCASES = sizeof cases / sizeof cases[0], BATCH = 50000 };

enum { MUT_NONE, MUT_QRAW, MUT_QONES, MUT_REUSE };

static void gen(const scase *c, int k, cs_rng *r, float *lp, float *lq) {
    const int V = c->V;
    for (int i = 0; i < V; i++) {
        lp[i] = (float)(2.0 * cs_normal(r));
        lq[i] = (float)(0.8 * lp[i] + 1.2 * cs_normal(r));
    }
    if (c->kind == K_SAME) memcpy(lq, lp, sizeof(float) * V);
    if (c->kind == K_DISJOINT)
        for (int i = 0; i < V; i++) {
            if (i < V / 2) lq[i] = -INFINITY;
            else lp[i] = -INFINITY;
        }
    if (c->kind == K_SPECIAL) {
        lp[(3 + k) % V] = NAN;
        lq[(5 + k) % V] = NAN;
        lp[(7 + 2 * k) % V] = -INFINITY;
        if (k % 2 == 0) {
            lp[(11 + k) % V] = INFINITY;
            lp[(20 + k) % V] = INFINITY;
        }
        if (k % 3 == 0) lq[(11 + k) % V] = INFINITY;
    }
}

static double overlap(const float *p, const float *q, int V, int match) {
    double ov = 0, cp = 0, cq = 0;
    for (int j = 0; j < V; j++) {
        if (!match) {
            ov += fmin(p[j], q[j]);
            continue;
        }
        double lo = fmax(cp, cq);
        cp += p[j] > 0 ? p[j] : 0;
        cq += q[j] > 0 ? q[j] : 0;
        double hi = fmin(cp, cq);
        if (p[j] > 0 && q[j] > 0 && hi > lo) ov += hi - lo;
    }
    return ov > 1 ? 1 : ov;
}

#define UP(d, h, n) cudaMemcpy((d), (h), (n), cudaMemcpyHostToDevice)
#define DOWN(h, d, n) cudaMemcpy((h), (d), (n), cudaMemcpyDeviceToHost)
static void *dalloc(size_t n) {
    void *p = NULL;
    if (cudaMalloc(&p, n ? n : 1) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc(%zu) failed\n", n);
        exit(1);
    }
    return p;
}

/* Runs one case; writes 2 p-values. */
static void run_case(int ci, long N, int mut, double pv[2]) {
    const scase *c = &cases[ci];
    const int V = c->V, g = c->gamma, R = g + 1;
    cs_rng r = {0x5eed0000ull + (uint64_t)ci};
    float *lp = malloc(sizeof(float) * (size_t)R * V), *lq = malloc(sizeof(float) * (size_t)R * V);
    float *P = malloc(sizeof(float) * (size_t)R * V), *Q = malloc(sizeof(float) * (size_t)R * V);
    for (int k = 0; k < R; k++) gen(c, k, &r, lp + (size_t)k * V, lq + (size_t)k * V);
    sd_sampling_params spp = c->sp;
    if (c->kind == K_ONEHOT_P) spp.temperature = 0.0f;
    size_t ss = sd_sampling_scratch_size(V);
    void *scratch = malloc(ss);
    for (int k = 0; k < R; k++) {
        sd_sampling_process(lp + (size_t)k * V, V, &spp, scratch, ss, P + (size_t)k * V, NULL);
        sd_sampling_process(lq + (size_t)k * V, V, &c->sp, scratch, ss, Q + (size_t)k * V, NULL);
    }
    const int B = BATCH;
    float *dlp = dalloc(sizeof(float) * (size_t)R * V), *dlq = dalloc(sizeof(float) * (size_t)R * V);
    float *dq = dalloc(sizeof(float) * (size_t)B * g * V);
    int32_t *ddraft = dalloc(sizeof(int32_t) * (size_t)B * SPECDEC_MAX_DRAFT);
    int32_t *dout = dalloc(sizeof(int32_t) * (size_t)B * (SPECDEC_MAX_DRAFT + 1)), *dn = dalloc(sizeof(int32_t) * B);
    uint64_t *dseed = dalloc(8 * (size_t)B), *dsid = dalloc(8 * (size_t)B);
    int64_t *dpos = dalloc(8 * (size_t)B), *dpos0 = dalloc(8 * (size_t)B);
    uint32_t *dwa = NULL, *dws_ = NULL;
    size_t pwsb = sd_cuda_sample_ws_bytes(B > R ? B : R, V);
    void *pws = dalloc(pwsb);
    size_t vwsb = sd_cuda_verify_ws_bytes(B, g, V);
    void *vws = dalloc(vwsb);
    float *dqraw = NULL;
    UP(dlp, lp, sizeof(float) * (size_t)R * V);
    UP(dlq, lq, sizeof(float) * (size_t)R * V);
    sd_errbuf eb = {{0}};
    sd_cuda_verify_ws_init(vws, vwsb, 0, &eb);
    uint64_t *seed = malloc(8 * (size_t)B), *sid = malloc(8 * (size_t)B);
    int64_t *zeros = calloc((size_t)B, 8);
    uint32_t *wa = NULL, *wsm = NULL;
    if (mut == MUT_REUSE) {
        wa = malloc(sizeof(uint32_t) * (size_t)B * SPECDEC_MAX_DRAFT);
        wsm = malloc(sizeof(uint32_t) * (size_t)B * (SPECDEC_MAX_DRAFT + 1));
        dwa = dalloc(sizeof(uint32_t) * (size_t)B * SPECDEC_MAX_DRAFT);
        dws_ = dalloc(sizeof(uint32_t) * (size_t)B * (SPECDEC_MAX_DRAFT + 1));
    }
    if (mut == MUT_QRAW || mut == MUT_QONES) {
        /* the rows handed to the verifier instead of the kept q: one row per position,
         * broadcast over sequences with q_seq_stride = 0 */
        dqraw = dalloc(sizeof(float) * (size_t)g * V);
        if (mut == MUT_QRAW) {
            sd_sampling_params raw = {1.0f, 0, 1.0f, 0.0f};
            const sd_cuda_sample_rows_args ra = {
                .logits = dlq, .ld_in = V, .n_rows = g, .n_vocab = V, .sp = raw, .probs = dqraw, .ld_out = V};
            sd_cuda_sample_process_rows(&ra, pws, pwsb, 0, &eb);
        } else {
            float *ones = malloc(sizeof(float) * (size_t)g * V);
            for (size_t i = 0; i < (size_t)g * V; i++) ones[i] = 1.0f;
            UP(dqraw, ones, sizeof(float) * (size_t)g * V);
            free(ones);
        }
    }
    double *cnt = calloc((size_t)V, sizeof(double)), ncnt[SPECDEC_MAX_DRAFT + 1] = {0};
    int32_t *out = malloc(sizeof(int32_t) * (size_t)B * (SPECDEC_MAX_DRAFT + 1)), *nacc = malloc(sizeof(int32_t) * B);
    const uint64_t cseed = 0xC0FFEEull + (uint64_t)ci;
    long errors = 0;
    for (long s0 = 0; s0 < N; s0 += B) {
        const int nb = (int)((N - s0) < B ? (N - s0) : B);
        for (int b = 0; b < nb; b++) {
            seed[b] = cseed;
            sid[b] = (uint64_t)(s0 + b);
        }
        UP(dseed, seed, 8 * (size_t)nb);
        UP(dsid, sid, 8 * (size_t)nb);
        UP(dpos, zeros, 8 * (size_t)nb);
        UP(dpos0, zeros, 8 * (size_t)nb);
        for (int i = 0; i < g; i++) {
            const sd_cuda_sample_draft_args da = {
                .logits = dlq + (size_t)i * V, .ld_logits = 0, .n_seq = nb, .n_vocab = V, .sp = c->sp,
                .mode = c->mode, .seed = dseed, .seq_id = dsid, .position = dpos, .advance_position = 1,
                .q_out = dq + (size_t)i * V, .ld_q = (int64_t)g * V, .tok_out = ddraft + i,
                .tok_stride = SPECDEC_MAX_DRAFT};
            errors += sd_cuda_sample_draft_step(&da, pws, pwsb, 0, &eb) != SPECDEC_OK;
        }
        sd_cuda_verify_args a;
        memset(&a, 0, sizeof a);
        a.mode = c->mode; a.gamma = g; a.n_vocab = V; a.n_seq = nb; a.sp = spp;
        a.logits = dlp; a.ld_logits = V; a.logits_seq_stride = 0;
        a.q = dqraw ? dqraw : dq; a.ld_q = V; a.q_seq_stride = dqraw ? 0 : (int64_t)g * V;
        a.draft = ddraft; a.draft_stride = SPECDEC_MAX_DRAFT;
        a.seed = dseed; a.seq_id = dsid; a.pos0 = dpos0;
        a.out_tokens = dout; a.out_stride = SPECDEC_MAX_DRAFT + 1; a.out_n_accepted = dn;
        if (mut == MUT_REUSE) {
            for (int b = 0; b < nb; b++)
                for (int i = 0; i <= g; i++) {
                    wsm[(size_t)b * (SPECDEC_MAX_DRAFT + 1) + i] = sd_rng_u32_at(cseed, sid[b], i, SD_RNG_PURPOSE_SAMPLE);
                    if (i < g) wa[(size_t)b * SPECDEC_MAX_DRAFT + i] = sd_rng_u32_at(cseed, sid[b], 0, SD_RNG_PURPOSE_ACCEPT);
                }
            UP(dwa, wa, sizeof(uint32_t) * (size_t)nb * SPECDEC_MAX_DRAFT);
            UP(dws_, wsm, sizeof(uint32_t) * (size_t)nb * (SPECDEC_MAX_DRAFT + 1));
            a.u_accept = dwa;
            a.u_sample = dws_;
        }
        errors += sd_cuda_verify(&a, vws, vwsb, 0, &eb) != SPECDEC_OK;
        if (cudaDeviceSynchronize() != cudaSuccess) errors++;
        DOWN(out, dout, sizeof(int32_t) * (size_t)nb * (SPECDEC_MAX_DRAFT + 1));
        DOWN(nacc, dn, sizeof(int32_t) * nb);
        for (int b = 0; b < nb; b++) {
            int n = nacc[b], t = out[(size_t)b * (SPECDEC_MAX_DRAFT + 1)];
            if (n < 0 || n > g || t < 0 || t >= V) {
                errors++;
                continue;
            }
            ncnt[n] += 1;
            cnt[t] += 1;
        }
    }
    SD_CHECK(errors == 0, "%s: %ld launch errors or invalid outputs (%s)", c->name, errors, eb.msg);
    double prob[256], x;
    int df;
    double tot = 0;
    for (int j = 0; j < V; j++) tot += (prob[j] = P[j]);
    for (int j = 0; j < V; j++) prob[j] /= tot;
    pv[0] = gof_pvalue(cnt, prob, V, (double)N, &x, &df);
    printf("  %-36s pos 0: chi2 %.1f df %d p %.3g\n", c->name, x, df, pv[0]);
    double pn[SPECDEC_MAX_DRAFT + 1], prod = 1;
    for (int k = 0; k <= g; k++) {
        double ak = k < g ? overlap(P + (size_t)k * V, Q + (size_t)k * V, V, c->mode == SPECDEC_VERIFY_MATCH) : 0;
        pn[k] = prod * (k < g ? 1 - ak : 1);
        if (pn[k] < 1e-12) pn[k] = 0;
        prod *= ak;
    }
    pv[1] = gof_pvalue(ncnt, pn, g + 1, (double)N, &x, &df);
    printf("  %-36s accepted-count: chi2 %.1f df %d p %.3g\n", c->name, x, df, pv[1]);
    cudaFree(dlp); cudaFree(dlq); cudaFree(dq); cudaFree(ddraft); cudaFree(dout); cudaFree(dn); cudaFree(dseed);
    cudaFree(dsid); cudaFree(dpos); cudaFree(dpos0); cudaFree(pws); cudaFree(vws);
    if (dqraw) cudaFree(dqraw);
    if (dwa) { cudaFree(dwa); cudaFree(dws_); }
    free(lp); free(lq); free(P); free(Q); free(scratch); free(seed); free(sid); free(zeros); free(wa); free(wsm);
    free(cnt); free(out); free(nacc);
}

int main(int argc, char **argv) {
    long N = 1000000;
    int mutants = 1;
    /* Under compute-sanitizer (gpu_check.sh sets SD_CUDA_TEST_QUICK=1) the run is ~100x
     * slower: fewer samples and no mutants; the full run is the plain ctest one. */
    if (getenv("SD_CUDA_TEST_QUICK")) {
        N = 20000;
        mutants = 0;
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--samples") && i + 1 < argc) N = atol(argv[++i]);
        else if (!strcmp(argv[i], "--no-mutants")) mutants = 0;
        else {
            fprintf(stderr, "usage: %s [--samples N] [--no-mutants]\n", argv[0]);
            return 2;
        }
    }
    if (specdec_cuda_device_count() <= 0) return sd_test_skip("no CUDA device");
    const int m = 2 * NCASES;
    const double alpha = 1e-6, thr = alpha / m;
    printf("H0: emitted token ~ p, accepted count ~ closed form; %d tests, alpha %g family-wise, per-test %.3g, "
           "%ld samples per case\n", m, alpha, thr, N);
    int rejected = 0;
    for (int ci = 0; ci < NCASES; ci++) {
        double pv[2];
        run_case(ci, N, MUT_NONE, pv);
        int rej = (pv[0] < thr) + (pv[1] < thr);
        printf("case %2d %-36s %s\n", ci, cases[ci].name, rej ? "REJECTED" : "ok");
        rejected += rej;
    }
    SD_CHECK(rejected == 0, "%d hypotheses rejected at per-test level %.3g", rejected, thr);
    if (mutants) {
        const char *names[4] = {"", "q before processing", "q = 1 (no ratio, residual = p)", "accept word reused"};
        for (int mu = MUT_QRAW; mu <= MUT_REUSE; mu++) {
            int caught = 0;
            /* the T=0.5 and top-k 5 cases separate q from its raw softmax */
            const int try_cases[3] = {1, 4, 7};
            for (int t = 0; t < 3 && !caught; t++) {
                double pv[2];
                run_case(try_cases[t], N, mu, pv);
                caught = pv[0] < thr || pv[1] < thr;
            }
            printf("mutant %-32s %s\n", names[mu], caught ? "caught" : "NOT caught");
            SD_CHECK(caught, "mutant '%s' was not caught at alpha %g", names[mu], alpha);
        }
    }
    return sd_test_done();
}
#endif
