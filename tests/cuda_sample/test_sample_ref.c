/* test_sample_ref.c — the GPU kernels' specification (tests/cuda_sample/sample_ref.h: qsort
 * ranking, Philox-word integer targets, its own spelled-out formulas) against the CPU
 * reference (kernels/cpu/sd_cpu_sample.c, sd_cpu_verify.c: heap ranking, double
 * uniforms, the rule functions of core/sd_sample_rules.h). Both follow the one spec of
 * core/sd_sample_rules.h (shared exp, exact fixed-point sums), so they must agree BIT
 * FOR BIT. Runs without a GPU (also under ASan), so the equality guarantee documented in
 * kernels/cuda/sd_cuda_sample.h is checked on every build:
 *  - processed rows: every probability bitwise identical (hence identical zero sets
 *    and argmax), exp included;
 *  - inverse-CDF samples for 64 words per row: identical tokens;
 *  - the verifier (rejection / greedy / match, gamma 0..8, random words): identical
 *    accepted counts and tokens.
 * Also checks sd_rule_topp_threshold against an independent long-double comparison.
 * Fixed seeds; no statistics involved. */
#include <stdio.h>
#include <stdlib.h>

#include "cs_common.h"
#include "sd_rng.h"
#include "sd_test.h"
#include "sd_cpu_verify.h"
#include "sample_ref.h"

static void check_topp_threshold(void) {
    cs_rng r = {77};
    int bad = 0;
    for (int t = 0; t < 20000; t++) {
        float tp = (float)cs_unit(&r);
        if (t % 7 == 0) tp = 0.5f;
        if (t % 11 == 0) tp = 1e-20f;
        sd_u128 S = (sd_u128)(cs_next(&r) >> (4 + t % 50)) + 1; /* < 2^60: exact in long double */
        sd_u128 thr = sd_rule_topp_threshold(tp, S);
        long double exact = (long double)tp * (long double)(uint64_t)S; /* 24 + 60 bits: may round */
        /* C = thr - 1 must be < tp*S and C = thr must not; use the exact integer form as
         * the oracle when long double cannot decide */
        for (int d = -1; d <= 0; d++) {
            sd_u128 C = thr + (sd_u128)(int64_t)d;
            long double c = (long double)(uint64_t)C;
            int below = c < exact;
            if (c == exact || (uint64_t)(C >> 60)) continue; /* undecidable in long double */
            if (below != (d == -1)) bad++;
        }
    }
    SD_CHECK(bad == 0, "sd_rule_topp_threshold disagrees with long double in %d cases", bad);
}

int main(void) {
    check_topp_threshold();
    const int Vs[] = {16, 1000, 32000};
    cs_rng r = {0xabcdef};
    long rows = 0, rows_ulp = 0, set_bad = 0, arg_bad = 0, ulp_bad = 0, smp_bad = 0, smp_n = 0;
    for (int vi = 0; vi < 3; vi++) {
        const int V = Vs[vi];
        float *l = malloc(sizeof(float) * V), *pc = malloc(sizeof(float) * V), *pg = malloc(sizeof(float) * V);
        double *w = malloc(sizeof(double) * V);
        int32_t *idx = malloc(sizeof(int32_t) * V);
        size_t ss = sd_sampling_scratch_size(V);
        void *scratch = malloc(ss);
        const int reps = V > 10000 ? 2 : 6;
        for (int kind = 0; kind < CS_KINDS; kind++)
            for (int pi = 0; pi < CS_NPARAMS; pi++)
                for (int rep = 0; rep < reps; rep++) {
                    cs_logits(&r, kind, l, V);
                    const sd_sampling_params *sp = &cs_params[pi];
                    sd_sampling_process(l, V, sp, scratch, ss, pc, NULL);
                    int32_t ag = sr_process(l, V, sp, NULL, w, idx, pg);
                    long sb = 0, ub = 0, any = 0;
                    for (int i = 0; i < V; i++) {
                        if ((pc[i] > 0) != (pg[i] > 0)) sb++;
                        long u = cs_ulps(pc[i], pg[i]);
                        if (u > 1) ub++;
                        if (memcmp(&pc[i], &pg[i], sizeof(float)) != 0) any = 1;
                    }
                    rows++;
                    rows_ulp += any;
                    if (sb && set_bad < 5)
                        fprintf(stderr, "  V=%d %s params %d: %ld set differences\n", V, cs_kind_name[kind], pi, sb);
                    set_bad += sb > 0;
                    ulp_bad += ub > 0;
                    arg_bad += ag != sd_sample_argmax(pc, V);
                    for (int s = 0; s < 64; s++) {
                        uint32_t x = (uint32_t)cs_next(&r);
                        if (s == 0) x = 0xffffffffu; /* u = 1 exactly */
                        if (s == 1) x = 0;
                        int32_t tc = sd_sample_inverse_cdf(pc, V, sd_rng_u32_to_uniform_double(x));
                        int32_t tg = sr_sample(pc, V, x);
                        smp_n++;
                        if (tc != tg && smp_bad++ < 5)
                            fprintf(stderr, "  V=%d %s: word %u: cpu %d spec %d\n", V, cs_kind_name[kind], x, tc, tg);
                    }
                }
        free(l); free(pc); free(pg); free(w); free(idx); free(scratch);
    }
    printf("rows %ld: zero-set mismatches %ld, argmax mismatches %ld, >1 ulp %ld, rows not bitwise equal %ld\n",
           rows, set_bad, arg_bad, ulp_bad, rows_ulp);
    printf("inverse-CDF samples %ld: mismatches %ld\n", smp_n, smp_bad);
    SD_CHECK(set_bad == 0, "%ld rows keep different token sets", set_bad);
    SD_CHECK(arg_bad == 0, "%ld rows with a different argmax", arg_bad);
    SD_CHECK(ulp_bad == 0, "%ld rows with a probability more than 1 ulp away", ulp_bad);
    SD_CHECK(rows_ulp == 0, "%ld rows differ from sample_ref in some bit (CPU != model of the GPU)", rows_ulp);
    SD_CHECK(smp_bad == 0, "%ld inverse-CDF samples differ", smp_bad);

    /* the verifier on the same processed rows */
    long vb = 0, vn = 0;
    const specdec_verify_mode modes[3] = {SPECDEC_VERIFY_REJECTION, SPECDEC_VERIFY_GREEDY, SPECDEC_VERIFY_MATCH};
    for (int t = 0; t < 3000; t++) {
        const int V = (t % 3 == 0) ? 1000 : 40, g = t % 9;
        const specdec_verify_mode mode = modes[t % 3];
        const sd_sampling_params *sp = &cs_params[t % CS_NPARAMS];
        float *P = malloc(sizeof(float) * (size_t)V * (g + 1)), *Q = malloc(sizeof(float) * (size_t)V * (g + 1));
        float *l = malloc(sizeof(float) * V);
        size_t ss = sd_sampling_scratch_size(V);
        void *scratch = malloc(ss);
        int32_t draft[SPECDEC_MAX_DRAFT], oc[SPECDEC_MAX_DRAFT + 1], og[SPECDEC_MAX_DRAFT + 1], nc = -1, ng;
        uint32_t wa[SPECDEC_MAX_DRAFT], ws[SPECDEC_MAX_DRAFT + 1];
        sd_verify_uniforms u;
        for (int i = 0; i <= g; i++) {
            cs_logits(&r, (t / 3) % 2 ? CS_NOISY : (int)(cs_next(&r) % CS_KINDS), l, V);
            sd_sampling_process(l, V, sp, scratch, ss, P + (size_t)i * V, NULL);
            for (int j = 0; j < V; j++) l[j] = 0.8f * l[j] + (float)cs_normal(&r);
            sd_sampling_process(l, V, sp, scratch, ss, Q + (size_t)i * V, NULL);
            ws[i] = (uint32_t)cs_next(&r);
            u.sample[i] = sd_rng_u32_to_uniform_double(ws[i]);
            if (i < g) {
                wa[i] = (uint32_t)cs_next(&r);
                u.accept[i] = sd_rng_u32_to_uniform_double(wa[i]);
                draft[i] = sd_sample_inverse_cdf(Q + (size_t)i * V, V, sd_rng_u32_to_uniform_double((uint32_t)cs_next(&r)));
                if (mode != SPECDEC_VERIFY_REJECTION && cs_next(&r) % 2) /* make matches likely */
                    draft[i] = mode == SPECDEC_VERIFY_GREEDY ? sd_sample_argmax(P + (size_t)i * V, V)
                                                            : sd_sample_inverse_cdf(P + (size_t)i * V, V, u.sample[i]);
            }
        }
        sd_verify(mode, g, V, P, Q, draft, &u, oc, &nc, NULL);
        ng = sr_verify(mode, g, V, P, Q, draft, wa, ws, og);
        vn++;
        int same = nc == ng;
        for (int i = 0; same && i <= nc; i++) same = oc[i] == og[i];
        if (!same && vb++ < 5) fprintf(stderr, "  verify case %d (mode %d, gamma %d): n cpu %d spec %d\n", t, mode, g, nc, ng);
        free(P); free(Q); free(l); free(scratch);
    }
    printf("verifier rounds %ld: mismatches %ld\n", vn, vb);
    SD_CHECK(vb == 0, "%ld verifier rounds differ", vb);
    return sd_test_done();
}
