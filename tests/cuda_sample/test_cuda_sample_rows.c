/* test_cuda_sample_rows.c — GPU row processing and the draft sampling step against the
 * host model (sample_ref.h) and the CPU reference (kernels/cpu/sd_cpu_sample.c,
 * sd_cpu_verify.c).
 * For V in {16, 1000, 32000, 151936, 256000}, every logit kind of cs_common.h (incl.
 * NaN / Inf / all -inf / ties) and the parameter grid:
 *  (a) GPU probs and argmax == sample_ref given the GPU's w, BIT FOR BIT;
 *  (b) GPU w == sd_rule_exp(z - m) computed on the host, BIT FOR BIT (the shared exp of
 *      core/sd_sample_rules.h);
 *  (c) vs sd_sampling_process (the CPU reference): BIT FOR BIT, same argmax;
 *  (d) in-place processing (probs == logits) gives the same bits.
 * Draft step (REJECTION / MATCH / GREEDY, 48 sequences, Philox words and injected
 * words): q rows == sample_ref with the host's exp (so == the CPU) bitwise, the token ==
 * sample_ref's sample of the GPU q with the word of
 * (seed, seq, position, purpose) and == sd_verify_draft_sample on the GPU q, written to
 * both outputs, position advanced by one; the same for the multi-block draft kernel
 * (blocks_per_row automatic and 1 / 8 / 13 / 64). Needs a GPU (skips otherwise). */
#include "sd_test.h"
#include "specdec.h"

#ifndef SPECDEC_WITH_CUDA
int main(void) { return sd_test_skip("no CUDA device"); }
#else
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cs_common.h"
#include "sd_cuda_sample.h"
#include "sd_rng.h"
#include "sd_cpu_verify.h"
#include "sample_ref.h"


static void *dalloc(size_t n) {
    void *p = NULL;
    if (cudaMalloc(&p, n ? n : 1) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc(%zu) failed\n", n);
        exit(1);
    }
    cudaMemset(p, 0xFF, n ? n : 1); /* poison: NaN floats, -1 ints */
    return p;
}

static void test_rows(int V, int reps) {
    const int R = CS_KINDS * reps;
    float *l = malloc(sizeof(float) * (size_t)R * V), *pg = malloc(sizeof(float) * (size_t)R * V);
    float *pr = malloc(sizeof(float) * V), *pc = malloc(sizeof(float) * V), *pin = malloc(sizeof(float) * (size_t)R * V);
    double *wg = malloc(sizeof(double) * (size_t)R * V), *w = malloc(sizeof(double) * V);
    int32_t *idx = malloc(sizeof(int32_t) * V), ag[64];
    size_t ss = sd_sampling_scratch_size(V);
    void *scratch = malloc(ss);
    cs_rng rng = {(uint64_t)V * 31 + 7};
    size_t wsb = sd_cuda_sample_ws_bytes(R, V);
    float *dl = dalloc(sizeof(float) * (size_t)R * V), *dp = dalloc(sizeof(float) * (size_t)R * V);
    void *dws = dalloc(wsb);
    int32_t *dag = dalloc(sizeof(int32_t) * R);
    long bit_bad = 0, w_bad = 0, set_bad = 0, ulp_bad = 0, arg_bad = 0, inplace_bad = 0, rows = 0;
    for (int pi = 0; pi < CS_NPARAMS; pi++) {
        const sd_sampling_params *sp = &cs_params[pi];
        for (int k = 0; k < R; k++) cs_logits(&rng, k % CS_KINDS, l + (size_t)k * V, V);
        cudaMemcpy(dl, l, sizeof(float) * (size_t)R * V, cudaMemcpyHostToDevice);
        sd_errbuf eb = {{0}};
        sd_cuda_sample_rows_args ra = {
            .logits = dl, .ld_in = V, .n_rows = R, .n_vocab = V, .sp = *sp, .probs = dp, .ld_out = V, .argmax_out = dag};
        SD_CHECK(sd_cuda_sample_process_rows(&ra, dws, wsb, 0, &eb) == SPECDEC_OK, "%s", eb.msg);
        SD_CHECK(cudaDeviceSynchronize() == cudaSuccess, "process kernel failed (V=%d)", V);
        cudaMemcpy(pg, dp, sizeof(float) * (size_t)R * V, cudaMemcpyDeviceToHost);
        cudaMemcpy(wg, dws, sizeof(double) * (size_t)R * V, cudaMemcpyDeviceToHost);
        cudaMemcpy(ag, dag, sizeof(int32_t) * R, cudaMemcpyDeviceToHost);
        /* in place */
        ra.probs = dl;
        ra.argmax_out = NULL;
        SD_CHECK(sd_cuda_sample_process_rows(&ra, dws, wsb, 0, &eb) == SPECDEC_OK, "%s", eb.msg);
        cudaMemcpy(pin, dl, sizeof(float) * (size_t)R * V, cudaMemcpyDeviceToHost);
        inplace_bad += memcmp(pin, pg, sizeof(float) * (size_t)R * V) != 0;
        for (int k = 0; k < R; k++) {
            const float *lk = l + (size_t)k * V, *gk = pg + (size_t)k * V;
            const double *wk = wg + (size_t)k * V;
            rows++;
            int32_t ar = sr_process(lk, V, sp, wk, w, idx, pr);
            if ((memcmp(pr, gk, sizeof(float) * V) || ar != ag[k]) && bit_bad++ < 5) {
                int i = 0;
                while (i < V && !memcmp(&pr[i], &gk[i], 4)) i++;
                fprintf(stderr, "  V=%d params %d row %d (%s): gpu != sample_ref at %d: %.9g vs %.9g, argmax %d/%d\n", V,
                        pi, k, cs_kind_name[k % CS_KINDS], i, i < V ? gk[i] : 0.f, i < V ? pr[i] : 0.f, ag[k], ar);
            }
            /* w vs the host's sd_rule_exp, bitwise (only rows where the kernel computed exp) */
            float mx = -INFINITY;
            for (int i = 0; i < V; i++)
                if (lk[i] > mx) mx = lk[i];
            if (sp->temperature > 0 && isfinite(mx)) {
                const double T = sp->temperature, m = (double)mx / T;
                for (int i = 0; i < V; i++) {
                    double ref = sd_rule_exp((isnan(lk[i]) ? -INFINITY : (double)lk[i] / T) - m);
                    if (memcmp(&ref, &wk[i], sizeof ref) != 0) {
                        w_bad++;
                        break;
                    }
                }
            }
            sd_sampling_process(lk, V, sp, scratch, ss, pc, NULL);
            long sb = 0, ub = 0;
            for (int i = 0; i < V; i++) {
                sb += (pc[i] > 0) != (gk[i] > 0);
                ub += memcmp(&pc[i], &gk[i], sizeof(float)) != 0; /* CPU == GPU bit for bit */
            }
            set_bad += sb > 0;
            ulp_bad += ub > 0;
            arg_bad += sd_sample_argmax(pc, V) != ag[k];
        }
    }
    printf("rows V=%-6d: %ld rows; gpu!=sample_ref %ld, w!=host %ld, set %ld, gpu!=cpu %ld, argmax %ld, in-place %ld\n", V,
           rows, bit_bad, w_bad, set_bad, ulp_bad, arg_bad, inplace_bad);
    SD_CHECK(bit_bad == 0, "V=%d: %ld rows differ from sample_ref", V, bit_bad);
    SD_CHECK(w_bad == 0, "V=%d: %ld rows with a w differing from the host's sd_rule_exp", V, w_bad);
    SD_CHECK(set_bad == 0 && arg_bad == 0, "V=%d: %ld zero-set, %ld argmax differences vs the CPU", V, set_bad, arg_bad);
    SD_CHECK(ulp_bad == 0, "V=%d: %ld rows differ from the CPU's bits", V, ulp_bad);
    SD_CHECK(inplace_bad == 0, "V=%d: in-place processing differs", V);
    cudaFree(dl); cudaFree(dp); cudaFree(dws); cudaFree(dag);
    free(l); free(pg); free(pr); free(pc); free(pin); free(wg); free(w); free(idx); free(scratch);
}

static void test_draft(int V, specdec_verify_mode mode, int inject, int bpr) {
    enum { BMAX = 48 };
    const int B = bpr ? 2 : BMAX; /* multi-block: few rows, so every block is resident */
    const sd_sampling_params sp = mode == SPECDEC_VERIFY_GREEDY ? cs_params[10] : cs_params[7];
    float *l = malloc(sizeof(float) * (size_t)B * V), *q = malloc(sizeof(float) * (size_t)B * V);
    float *pr = malloc(sizeof(float) * V);
    double *wg = malloc(sizeof(double) * (size_t)B * V), *w = malloc(sizeof(double) * V);
    int32_t *idx = malloc(sizeof(int32_t) * V), tok[BMAX], tok2[2 * BMAX];
    uint64_t seed[BMAX], sid[BMAX];
    int64_t pos[BMAX], pos_after[BMAX];
    uint32_t words[BMAX];
    cs_rng rng = {(uint64_t)V + (uint64_t)mode * 1000 + (uint64_t)inject};
    for (int b = 0; b < B; b++) {
        cs_logits(&rng, b % 3 == 0 ? CS_SPECIAL : CS_NOISY, l + (size_t)b * V, V);
        seed[b] = cs_next(&rng);
        sid[b] = b % 5 == 0 ? cs_next(&rng) : (uint64_t)b;
        pos[b] = (int64_t)(cs_next(&rng) % 100000);
        words[b] = (uint32_t)cs_next(&rng);
    }
    float *dl = dalloc(sizeof(float) * (size_t)B * V), *dq = dalloc(sizeof(float) * (size_t)B * V);
    uint64_t *dseed = dalloc(sizeof seed), *dsid = dalloc(sizeof sid);
    int64_t *dpos = dalloc(sizeof pos);
    uint32_t *dwords = dalloc(sizeof words);
    int32_t *dtok = dalloc(sizeof tok), *dtok2 = dalloc(sizeof tok2);
    size_t wsb = sd_cuda_sample_ws_bytes(B, V);
    void *dws = dalloc(wsb);
    cudaMemcpy(dl, l, sizeof(float) * (size_t)B * V, cudaMemcpyHostToDevice);
    cudaMemcpy(dseed, seed, sizeof seed, cudaMemcpyHostToDevice);
    cudaMemcpy(dsid, sid, sizeof sid, cudaMemcpyHostToDevice);
    cudaMemcpy(dpos, pos, sizeof pos, cudaMemcpyHostToDevice);
    cudaMemcpy(dwords, words, sizeof words, cudaMemcpyHostToDevice);
    sd_errbuf eb = {{0}};
    SD_CHECK(sd_cuda_sample_ws_init(dws, wsb, 0, &eb) == SPECDEC_OK, "%s", eb.msg);
    const sd_cuda_sample_draft_args da = {
        .logits = dl, .ld_logits = V, .n_seq = B, .n_vocab = V, .sp = sp, .mode = mode, .seed = dseed,
        .seq_id = dsid, .position = dpos, .advance_position = 1, .u_words = inject ? dwords : NULL, .q_out = dq,
        .ld_q = V, .tok_out = dtok, .tok_stride = 1, .tok_out2 = dtok2, .tok2_stride = 2, .blocks_per_row = bpr};
    SD_CHECK(sd_cuda_sample_draft_step(&da, dws, wsb, 0, &eb) == SPECDEC_OK, "%s", eb.msg);
    SD_CHECK(cudaDeviceSynchronize() == cudaSuccess, "draft kernel failed");
    cudaMemcpy(q, dq, sizeof(float) * (size_t)B * V, cudaMemcpyDeviceToHost);
    cudaMemcpy(wg, dws, sizeof(double) * (size_t)B * V, cudaMemcpyDeviceToHost);
    cudaMemcpy(tok, dtok, sizeof tok, cudaMemcpyDeviceToHost);
    cudaMemcpy(tok2, dtok2, sizeof tok2, cudaMemcpyDeviceToHost);
    cudaMemcpy(pos_after, dpos, sizeof pos, cudaMemcpyDeviceToHost);
    long bad = 0;
    for (int b = 0; b < B; b++) {
        const float *qb = q + (size_t)b * V;
        sr_process(l + (size_t)b * V, V, &sp, NULL, w, idx, pr); /* host exp: CPU == GPU */
        int qok = !memcmp(pr, qb, sizeof(float) * V);
        const int purpose = mode == SPECDEC_VERIFY_MATCH ? SD_RNG_PURPOSE_SAMPLE : SD_RNG_PURPOSE_DRAFT;
        uint32_t x = inject ? words[b] : sd_rng_u32_at(seed[b], sid[b], pos[b], purpose);
        int32_t want = mode == SPECDEC_VERIFY_GREEDY ? sr_argmax(qb, V) : sr_sample(qb, V, x);
        int32_t cpu = inject ? (mode == SPECDEC_VERIFY_GREEDY ? sd_sample_argmax(qb, V)
                                                              : sd_sample_inverse_cdf(qb, V, sd_rng_u32_to_uniform_double(x)))
                             : sd_verify_draft_sample(mode, qb, V, seed[b], sid[b], pos[b]);
        int ok = qok && tok[b] == want && tok[b] == cpu && tok2[2 * b] == tok[b] && pos_after[b] == pos[b] + 1 &&
                 tok[b] >= 0 && tok[b] < V;
        if (!ok && bad++ < 5)
            fprintf(stderr, "  draft V=%d mode %d inject %d seq %d: q %s, token %d (spec %d, cpu %d, copy %d), pos %lld->%lld\n",
                    V, mode, inject, b, qok ? "ok" : "DIFFERS", tok[b], want, cpu, tok2[2 * b], (long long)pos[b],
                    (long long)pos_after[b]);
    }
    printf("draft V=%-6d mode %d inject %d blocks/row %d: %ld bad sequences of %d\n", V, mode, inject, bpr, bad, (int)B);
    SD_CHECK(bad == 0, "draft step V=%d mode %d: %ld sequences wrong", V, mode, bad);
    cudaFree(dl); cudaFree(dq); cudaFree(dseed); cudaFree(dsid); cudaFree(dpos); cudaFree(dwords); cudaFree(dtok);
    cudaFree(dtok2); cudaFree(dws);
    free(l); free(q); free(pr); free(wg); free(w); free(idx);
}

int main(void) {
    if (specdec_cuda_device_count() <= 0) return sd_test_skip("no CUDA device");
    const int Vs[5] = {16, 1000, 32000, 151936, 256000};
    for (int i = 0; i < 5; i++) test_rows(Vs[i], Vs[i] > 100000 ? 1 : 3);
    const specdec_verify_mode modes[3] = {SPECDEC_VERIFY_REJECTION, SPECDEC_VERIFY_MATCH, SPECDEC_VERIFY_GREEDY};
    for (int m = 0; m < 3; m++)
        for (int inj = 0; inj < 2; inj++) {
            test_draft(1000, modes[m], inj, 0);
            test_draft(151936, modes[m], inj, 0);
            /* multi-block (sd_cuda_verify_mb.cu): automatic and explicit block counts */
            test_draft(1000, modes[m], inj, SD_CUDA_MB_AUTO);
            test_draft(4096, modes[m], inj, 1 + 7 * inj);
            test_draft(32000, modes[m], inj, 13);
            test_draft(151936, modes[m], inj, SD_CUDA_MB_AUTO);
            test_draft(151936, modes[m], inj, 64);
        }
    /* argument checks: nothing launched, a status with detail */
    sd_errbuf eb = {{0}};
    sd_sampling_params bad = {-1.0f, 0, 1.0f, 0.0f};
    const sd_cuda_sample_rows_args neg = {
        .logits = (const float *)8, .ld_in = 16, .n_rows = 1, .n_vocab = 16, .sp = bad, .probs = (float *)8, .ld_out = 16};
    SD_CHECK(sd_cuda_sample_process_rows(&neg, (void *)8, 1 << 20, 0, &eb) == SPECDEC_ERR_INVALID_ARGUMENT,
             "negative temperature accepted");
    const sd_cuda_sample_rows_args big = {.logits = (const float *)8, .ld_in = 300000, .n_rows = 1, .n_vocab = 300000,
                                          .sp = cs_params[0], .probs = (float *)8, .ld_out = 300000};
    SD_CHECK(sd_cuda_sample_process_rows(&big, (void *)8, (size_t)1 << 30, 0, &eb) == SPECDEC_ERR_INVALID_ARGUMENT,
             "V beyond the maximum accepted");
    SD_CHECK(sd_cuda_sample_process_rows(NULL, (void *)8, 1 << 20, 0, &eb) == SPECDEC_ERR_INVALID_ARGUMENT,
             "NULL args accepted");
    return sd_test_done();
}
#endif
