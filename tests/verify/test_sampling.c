/* test_sampling.c — sd_sampling_process over every option combination on random
 * logits with ties, NaN and ±Inf, against two references:
 *  - tests/cuda_sample/sample_ref.h (the specification with the shared exact helpers of
 *    core/sd_sample_rules.h, but qsort ranking): BIT FOR BIT;
 *  - an independently written plain fp64 reference (glibc exp, sequential double sums,
 *    no shared code): same zero sets, same argmax, every probability within
 *    REF_ULPS float ulps. The spec's exp is a few double ulps from glibc's and its sums
 *    are exact where the reference rounds (relative ~V 2^-53), so the float outputs can
 *    differ by a rounding step; a top-p set could in principle differ when the mass
 *    before a token lies within that rounding of top_p * S (not on this fixed data).
 * Plus inverse-CDF and argmax edge cases, parameter validation, in-place use, scratch
 * checks, and the V = 151936 / 256000 sizes. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sd_alloc.h"
#include "sd_cpu_sample.h"
#include "sd_test.h"
#include "sd_test_util.h"
#include "../cuda_sample/sample_ref.h"

/* tolerance against the plain fp64 reference, in float ulps (see the header comment) */
#define REF_ULPS 2

static long fulps(float a, float b) {
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    long d = (long)ia - (long)ib;
    return d < 0 ? -d : d;
}

/* 0 if got matches the fp64 reference within tolerance (same zero set, same argmax,
 * REF_ULPS), else 1 + the first offending id. */
static int near_ref(const float *got, const float *ref, int V) {
    for (int i = 0; i < V; i++)
        if ((got[i] > 0) != (ref[i] > 0) || fulps(got[i], ref[i]) > REF_ULPS) return 1 + i;
    if (sd_sample_argmax(got, V) != sd_sample_argmax(ref, V)) return 1;
    return 0;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t next_u64(void) { return sd_test_splitmix64(&rng_state); }
static double next_unit(void) { return (double)(next_u64() >> 11) * 0x1.0p-53; }
static double next_normal(void) {
    double u1 = next_unit(), u2 = next_unit();
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

/* ---- fp64 reference: full sort, straightforward ---- */
typedef struct {
    double w;
    int32_t id;
} wid;
static int cmp_wid(const void *a, const void *b) {
    const wid *x = a, *y = b;
    if (x->w > y->w) return -1;
    if (x->w < y->w) return 1;
    return (x->id > y->id) - (x->id < y->id);
}

static void ref_process(const float *logits, int V, float T, int top_k, float top_p, float min_p, float *out,
                        double *w, wid *tmp) {
    if (T == 0.0f) {
        int best = 0;
        double bv = -INFINITY;
        for (int i = 0; i < V; i++) {
            double v = isnan(logits[i]) ? -INFINITY : logits[i];
            if (v > bv) { bv = v; best = i; }
        }
        for (int i = 0; i < V; i++) out[i] = i == best ? 1.0f : 0.0f;
        return;
    }
    double m = -INFINITY;
    for (int i = 0; i < V; i++) {
        w[i] = isnan(logits[i]) ? -INFINITY : (double)logits[i] / (double)T;
        if (w[i] > m) m = w[i];
    }
    if (m == -INFINITY) {
        for (int i = 0; i < V; i++) out[i] = i == 0 ? 1.0f : 0.0f;
        return;
    }
    for (int i = 0; i < V; i++) w[i] = (m == INFINITY) ? (w[i] == INFINITY ? 1.0 : 0.0) : exp(w[i] - m);
    int n = 0;
    for (int i = 0; i < V; i++)
        if (w[i] > 0) tmp[n++] = (wid){w[i], i};
    qsort(tmp, (size_t)n, sizeof(wid), cmp_wid);
    if (top_k > 0 && top_k < n) {
        for (int r = top_k; r < n; r++) w[tmp[r].id] = 0;
        n = top_k;
    }
    if (top_p < 1.0f) {
        double S = 0;
        for (int i = 0; i < V; i++) S += w[i];
        double c = 0;
        int r = 0;
        for (; r < n && c < (double)top_p * S; r++) c += w[tmp[r].id];
        for (; r < n; r++) w[tmp[r].id] = 0;
    }
    if (min_p > 0.0f) {
        double wmax = w[tmp[0].id];
        for (int i = 0; i < V; i++)
            if (w[i] < (double)min_p * wmax) w[i] = 0;
    }
    double S = 0;
    for (int i = 0; i < V; i++) S += w[i];
    for (int i = 0; i < V; i++) out[i] = (float)(w[i] / S);
}

static void gen_logits(float *l, int V, int kind) {
    for (int i = 0; i < V; i++) {
        double g = next_normal() * 3.0;
        if (kind == 1) g = floor(g * 2) / 2; /* many ties */
        if (kind == 3) g = (double)(next_u64() % 3); /* huge tie groups */
        l[i] = (float)g;
    }
    if (kind == 2) { /* specials */
        int nn = 1 + (int)(next_u64() % 3);
        for (int j = 0; j < nn; j++) l[next_u64() % (uint64_t)V] = NAN;
        l[next_u64() % (uint64_t)V] = -INFINITY;
        if (next_u64() & 1) {
            l[next_u64() % (uint64_t)V] = INFINITY;
            l[next_u64() % (uint64_t)V] = INFINITY;
        }
    }
}

static void test_vs_reference(void) {
    const int Vs[] = {1, 2, 7, 64, 257, 1000};
    const float Ts[] = {0.0f, 0.5f, 1.0f, 2.0f, 1e-3f};
    const int Ks[] = {0, 1, 2, 5, 63, 100000};
    const float Ps[] = {1.0f, 0.9f, 0.5f, 1e-6f};
    const float Ms[] = {0.0f, 0.05f, 0.3f, 1.0f};
    int Vmax = 1000;
    float *l = malloc(sizeof(float) * Vmax), *got = malloc(sizeof(float) * Vmax), *ref = malloc(sizeof(float) * Vmax);
    double *w = malloc(sizeof(double) * Vmax);
    wid *tmp = malloc(sizeof(wid) * Vmax);
    size_t ss = sd_sampling_scratch_size(Vmax);
    char *scratch = malloc(ss + 1);
    double *sw = malloc(sizeof(double) * Vmax);
    int32_t *sidx = malloc(sizeof(int32_t) * Vmax);
    float *spec = malloc(sizeof(float) * Vmax);
    long cases = 0, mism = 0, badsum = 0, spec_bad = 0, ref_bitwise = 0;
    for (size_t a = 0; a < 6; a++)
        for (int kind = 0; kind < 4; kind++)
            for (int rep = 0; rep < 3; rep++) {
                int V = Vs[a];
                gen_logits(l, V, kind);
                for (size_t b = 0; b < 5; b++)
                    for (size_t c = 0; c < 6; c++)
                        for (size_t d = 0; d < 4; d++)
                            for (size_t e = 0; e < 4; e++) {
                                sd_sampling_params sp = {Ts[b], Ks[c], Ps[d], Ms[e]};
                                /* odd scratch alignment on purpose */
                                specdec_status st = sd_sampling_process(l, V, &sp, scratch + (rep & 1), ss, got, NULL);
                                ref_process(l, V, Ts[b], Ks[c], Ps[d], Ms[e], ref, w, tmp);
                                sr_process(l, V, &sp, NULL, sw, sidx, spec);
                                cases++;
                                if (st != SPECDEC_OK || memcmp(got, spec, sizeof(float) * (size_t)V) != 0) {
                                    if (spec_bad++ < 5) {
                                        int i = 0;
                                        while (i < V && !memcmp(&got[i], &spec[i], 4)) i++;
                                        fprintf(stderr, "not bitwise sample_ref V=%d kind=%d T=%g k=%d p=%g minp=%g: id %d got %.9g spec %.9g\n",
                                                V, kind, Ts[b], Ks[c], Ps[d], Ms[e], i, i < V ? got[i] : 0, i < V ? spec[i] : 0);
                                    }
                                }
                                ref_bitwise += memcmp(got, ref, sizeof(float) * (size_t)V) == 0;
                                if (st != SPECDEC_OK || near_ref(got, ref, V)) {
                                    if (mism++ < 5) {
                                        int i = near_ref(got, ref, V) - 1;
                                        if (i < 0) i = 0;
                                        fprintf(stderr, "mismatch V=%d kind=%d T=%g k=%d p=%g minp=%g: id %d got %.9g ref %.9g\n",
                                                V, kind, Ts[b], Ks[c], Ps[d], Ms[e], i, i < V ? got[i] : 0, i < V ? ref[i] : 0);
                                    }
                                }
                                double s = 0;
                                int nz = 0, nan = 0;
                                for (int i = 0; i < V; i++) {
                                    s += got[i];
                                    nz += got[i] > 0;
                                    nan += isnan(got[i]) || got[i] < 0;
                                }
                                if (fabs(s - 1) > 1e-5 || nz == 0 || nan) badsum++;
                                if (Ks[c] > 0 && Ts[b] > 0 && nz > Ks[c]) badsum++;
                            }
            }
    printf("sampling: %ld cases; vs sample_ref: %ld not bitwise; vs fp64 reference: %ld beyond %d ulps or other sets "
           "(%ld bitwise equal); %ld bad rows\n", cases, spec_bad, mism, REF_ULPS, ref_bitwise, badsum);
    SD_CHECK(spec_bad == 0, "%ld processed rows differ from sample_ref in some bit", spec_bad);
    SD_CHECK(mism == 0, "%ld processed rows differ from the fp64 reference beyond tolerance", mism);
    SD_CHECK(badsum == 0, "%ld rows not a distribution / top-k violated", badsum);
    free(l); free(got); free(ref); free(w); free(tmp); free(scratch); free(sw); free(sidx); free(spec);
}

static void process(const float *l, int V, float T, int k, float p, float mp, float *out) {
    static char scratch[1 << 16];
    sd_sampling_params sp = {T, k, p, mp};
    specdec_status st = sd_sampling_process(l, V, &sp, scratch, sizeof scratch, out, NULL);
    SD_CHECK(st == SPECDEC_OK, "process failed: %s", specdec_last_error());
}

static void test_semantics(void) {
    float out[8];
    /* +inf tokens share the mass */
    float l1[6] = {1, INFINITY, 3, INFINITY, NAN, -INFINITY};
    process(l1, 6, 1.0f, 0, 1.0f, 0.0f, out);
    SD_CHECK(out[1] == 0.5f && out[3] == 0.5f && out[0] == 0 && out[2] == 0, "+inf share");
    process(l1, 6, 0.7f, 1, 1.0f, 0.0f, out);
    SD_CHECK(out[1] == 1.0f && out[3] == 0.0f, "+inf with top-k 1: lowest id");
    process(l1, 6, 0.0f, 0, 1.0f, 0.0f, out);
    SD_CHECK(out[1] == 1.0f, "greedy picks first +inf");
    /* all -inf / NaN → one-hot 0, for greedy and sampling */
    float l2[4] = {NAN, -INFINITY, NAN, -INFINITY};
    process(l2, 4, 1.0f, 2, 0.9f, 0.1f, out);
    SD_CHECK(out[0] == 1.0f && out[1] == 0 && out[2] == 0 && out[3] == 0, "all -inf/NaN sampling");
    process(l2, 4, 0.0f, 0, 1.0f, 0.0f, out);
    SD_CHECK(out[0] == 1.0f, "all -inf/NaN greedy");
    /* ties: top-k keeps the lower ids */
    float l3[5] = {1, 2, 2, 2, 0};
    process(l3, 5, 1.0f, 2, 1.0f, 0.0f, out);
    SD_CHECK(out[1] == 0.5f && out[2] == 0.5f && out[3] == 0, "top-k tie break by id");
    process(l3, 5, 0.0f, 0, 1.0f, 0.0f, out);
    SD_CHECK(out[1] == 1.0f, "greedy tie break by id");
    /* top-p: smallest prefix reaching the mass; exact boundary keeps nothing more */
    float l4[4] = {(float)log(0.5), (float)log(0.25), (float)log(0.125), (float)log(0.125)};
    process(l4, 4, 1.0f, 0, 0.5f, 0.0f, out);
    SD_CHECK(out[0] == 1.0f && out[1] == 0, "top-p 0.5 on (.5,.25,..) keeps one token");
    process(l4, 4, 1.0f, 0, 0.6f, 0.0f, out);
    SD_CHECK(fabsf(out[0] - 2.0f / 3) < 1e-6f && fabsf(out[1] - 1.0f / 3) < 1e-6f && out[2] == 0, "top-p 0.6");
    /* top-k then top-p masking down to one token */
    process(l4, 4, 1.0f, 3, 1e-6f, 0.0f, out);
    SD_CHECK(out[0] == 1.0f, "top-p tiny keeps the top token");
    /* min-p relative to max */
    process(l4, 4, 1.0f, 0, 1.0f, 0.3f, out);
    SD_CHECK(fabsf(out[0] - 2.0f / 3) < 1e-6f && out[2] == 0, "min-p 0.3");
    /* temperature extremes: no NaN */
    float l5[3] = {3e38f, -3e38f, 1};
    process(l5, 3, 1e-30f, 0, 1.0f, 0.0f, out);
    SD_CHECK(out[0] == 1.0f && out[1] == 0 && out[2] == 0, "tiny temperature");
    process(l5, 3, 1e30f, 0, 1.0f, 0.0f, out);
    SD_CHECK(!isnan(out[0]) && fabsf(out[0] + out[1] + out[2] - 1) < 1e-6f, "huge temperature");
    /* in place */
    float l6[5] = {0.1f, 0.2f, 3, -1, 2}, r6[5];
    memcpy(r6, l6, sizeof l6);
    process(r6, 5, 0.8f, 3, 0.95f, 0.01f, out);
    process(l6, 5, 0.8f, 3, 0.95f, 0.01f, l6);
    SD_CHECK(memcmp(out, l6, sizeof l6) == 0, "in-place processing");
}

static void test_errors(void) {
    float l[4] = {0, 1, 2, 3}, out[4];
    char scratch[256];
    sd_sampling_params bad[] = {{-1, 0, 1, 0}, {NAN, 0, 1, 0}, {INFINITY, 0, 1, 0}, {1, -1, 1, 0},
                                {1, 0, 0, 0}, {1, 0, 1.5f, 0}, {1, 0, NAN, 0}, {1, 0, 1, -0.1f},
                                {1, 0, 1, 1.1f}, {1, 0, 1, NAN}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        out[0] = 42;
        specdec_status st = sd_sampling_process(l, 4, &bad[i], scratch, sizeof scratch, out, NULL);
        SD_CHECK(st == SPECDEC_ERR_INVALID_ARGUMENT && out[0] == 42, "bad params %zu accepted", i);
        SD_CHECK(strstr(specdec_last_error(), "sampling:") != NULL, "detail: %s", specdec_last_error());
    }
    sd_sampling_params ok = {1, 0, 1, 0};
    SD_CHECK(sd_sampling_process(l, 4, &ok, scratch, sd_sampling_scratch_size(4) - 1, out, NULL) ==
                 SPECDEC_ERR_INVALID_ARGUMENT, "short scratch");
    SD_CHECK(sd_sampling_process(l, 0, &ok, scratch, sizeof scratch, out, NULL) == SPECDEC_ERR_INVALID_ARGUMENT, "V=0");
    SD_CHECK(sd_sampling_process(NULL, 4, &ok, scratch, sizeof scratch, out, NULL) == SPECDEC_ERR_INVALID_ARGUMENT,
             "NULL logits");
    SD_CHECK(sd_sampling_process(l, 4, &ok, NULL, 0, out, NULL) == SPECDEC_ERR_INVALID_ARGUMENT, "NULL scratch");
    SD_CHECK(sd_sampling_process(l, 4, &ok, scratch, sizeof scratch, out, NULL) == SPECDEC_OK, "valid call");
    specdec_generate_params gp;
    memset(&gp, 0, sizeof gp); /* not specdec_generate_default_params(): keeps the engine out of this test */
    gp.temperature = 0.8f;
    gp.top_k = 40;
    gp.top_p = 0.95f;
    gp.min_p = 0.05f;
    sd_sampling_params from = sd_sampling_params_from(&gp);
    SD_CHECK(from.temperature == gp.temperature && from.top_k == gp.top_k && from.top_p == gp.top_p &&
                 from.min_p == gp.min_p, "params_from");
    SD_CHECK(sd_sampling_check_params(&from, NULL) == SPECDEC_OK, "default params valid");
}

static void test_inverse_cdf(void) {
    const double tiny = 0x1p-32;
    float p[6] = {0, 0.25f, 0, 0.5f, 0.25f, 0};
    SD_CHECK(sd_sample_inverse_cdf(p, 6, tiny) == 1, "u tiny → first positive");
    SD_CHECK(sd_sample_inverse_cdf(p, 6, 0.0) == 1, "u 0 → first positive");
    SD_CHECK(sd_sample_inverse_cdf(p, 6, -1.0) == 1, "u < 0");
    SD_CHECK(sd_sample_inverse_cdf(p, 6, NAN) == 1, "u NaN");
    SD_CHECK(sd_sample_inverse_cdf(p, 6, 0.25) == 1, "u on boundary belongs to the left segment");
    SD_CHECK(sd_sample_inverse_cdf(p, 6, 0.25 + tiny) == 3, "just past boundary skips zero token");
    SD_CHECK(sd_sample_inverse_cdf(p, 6, 0.75) == 3, "boundary 0.75");
    SD_CHECK(sd_sample_inverse_cdf(p, 6, 1.0) == 4, "u = 1 → last positive, not trailing zero");
    SD_CHECK(sd_sample_inverse_cdf(p, 6, 1.5) == 4, "u > 1");
    float shortrow[4] = {0.2f, 0.3f, 0.1f, 0};
    SD_CHECK(sd_sample_inverse_cdf(shortrow, 4, 0.95) == 2, "row short of 1 → last positive");
    float zero[3] = {0, 0, 0};
    SD_CHECK(sd_sample_inverse_cdf(zero, 3, 0.5) == 0, "all-zero row → 0");
    SD_CHECK(sd_sample_inverse_cdf(NULL, 3, 0.5) == 0 && sd_sample_inverse_cdf(p, 0, 0.5) == 0, "degenerate");
    float nanrow[3] = {NAN, 0.5f, 0.5f};
    SD_CHECK(sd_sample_inverse_cdf(nanrow, 3, 0.1) == 1, "NaN prob has no segment");
    /* sweep: ids in range, never zero-probability, segment counts match probabilities */
    enum { V = 37 };
    float q[V];
    double tot = 0;
    for (int i = 0; i < V; i++) {
        q[i] = (i % 4 == 0) ? 0.0f : (float)(1 + i % 5);
        tot += q[i];
    }
    for (int i = 0; i < V; i++) q[i] = (float)(q[i] / tot * 0.999); /* sums short of 1 */
    long cnt[V] = {0}, bad = 0;
    const long N = 1 << 20;
    for (long j = 1; j <= N; j++) {
        int t = sd_sample_inverse_cdf(q, V, (double)j / N);
        if (t < 0 || t >= V || q[t] == 0) bad++;
        else cnt[t]++;
    }
    SD_CHECK(bad == 0, "%ld out-of-range or zero-prob samples", bad);
    /* expected: #{j : c_{i-1} < j/N <= c_i}, the last positive token also owning (c_V, 1] */
    long worst = 0;
    double c = 0;
    int lastpos = V - 1;
    while (q[lastpos] == 0) lastpos--;
    for (int i = 0; i < V; i++) {
        if (q[i] == 0) continue;
        double c0 = c;
        c += q[i];
        long expect = (i == lastpos ? N : (long)floor(c * N)) - (long)floor(c0 * N);
        long diff = labs(cnt[i] - expect);
        if (diff > worst) worst = diff;
    }
    SD_CHECK(worst <= 2, "segment sizes off by %ld", worst);
    /* argmax */
    float a[5] = {NAN, 1, 3, 3, INFINITY};
    SD_CHECK(sd_sample_argmax(a, 5) == 4, "argmax +inf");
    SD_CHECK(sd_sample_argmax(a, 4) == 2, "argmax tie lowest id, NaN ignored");
    float b[3] = {NAN, NAN, -INFINITY};
    SD_CHECK(sd_sample_argmax(b, 3) == 0, "argmax all NaN/-inf → 0");
}

/* The production vocab sizes: reference equality with top-p / top-k / min-p on one row each. */
static void test_big_vocab(void) {
    const int Vs[2] = {151936, 256000};
    for (int a = 0; a < 2; a++) {
        int V = Vs[a];
        float *l = malloc(sizeof(float) * V), *got = malloc(sizeof(float) * V), *ref = malloc(sizeof(float) * V);
        double *w = malloc(sizeof(double) * V);
        wid *tmp = malloc(sizeof(wid) * V);
        int32_t *sidx = malloc(sizeof(int32_t) * V);
        float *spec = malloc(sizeof(float) * V);
        size_t ss = sd_sampling_scratch_size(V);
        void *scratch = sd_malloc(ss);
        gen_logits(l, V, a == 0 ? 1 : 2);
        const sd_sampling_params ps[] = {{1.0f, 0, 0.9f, 0.0f}, {0.7f, 50, 0.95f, 0.05f}, {1.3f, 0, 1.0f, 0.02f},
                                         {0.0f, 0, 1.0f, 0.0f}};
        for (int i = 0; i < 4; i++) {
            specdec_status st = sd_sampling_process(l, V, &ps[i], scratch, ss, got, NULL);
            ref_process(l, V, ps[i].temperature, ps[i].top_k, ps[i].top_p, ps[i].min_p, ref, w, tmp);
            SD_CHECK(st == SPECDEC_OK && near_ref(got, ref, V) == 0, "V=%d params %d: beyond the fp64 tolerance", V, i);
            sr_process(l, V, &ps[i], NULL, w, sidx, spec);
            SD_CHECK(memcmp(got, spec, sizeof(float) * (size_t)V) == 0, "V=%d params %d: not bitwise sample_ref", V, i);
        }
        free(l); free(got); free(ref); free(w); free(tmp); free(sidx); free(spec);
        sd_free(scratch);
    }
}

int main(void) {
    test_vs_reference();
    test_semantics();
    test_errors();
    test_inverse_cdf();
    test_big_vocab();
    return sd_test_done();
}
