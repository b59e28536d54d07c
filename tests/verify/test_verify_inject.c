/* test_verify_inject.c — sd_verify with injected uniforms equals an independently
 * written fp64 reference verifier, token for token, over many random cases in all
 * three modes (including q(x) = 0, p(x) = 0, p == q, boundary uniforms); argument
 * validation; and the coupled ("match") guarantee: speculative decoding emits exactly
 * the plain-decoding sequence for the same seed, for any draft model and γ, on small
 * Markov-chain target/draft models (likewise greedy). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sd_rng.h"
#include "sd_cpu_sample.h"
#include "sd_test.h"
#include "sd_test_util.h"
#include "sd_cpu_verify.h"

static uint64_t rs = 12345;
static uint64_t next_u64(void) { return sd_test_splitmix64(&rs); }
static double unit(void) { return (double)(next_u64() >> 11) * 0x1.0p-53; }
static int below(int n) { return (int)(next_u64() % (uint64_t)n); }

enum { VMAX = 64, GMAX = SPECDEC_MAX_DRAFT };

/* ---- fp64 reference verifier: normalises explicitly, divides instead of multiplies ---- */
static int ref_invcdf(const double *w, int V, double u) { /* w sums to 1 (or short) */
    double c = 0;
    int last = -1;
    for (int i = 0; i < V; i++) {
        if (w[i] <= 0) continue;
        c += w[i];
        last = i;
        if (u <= c) return i;
    }
    return last < 0 ? 0 : last;
}
static int ref_argmax(const float *p, int V) {
    int b = 0;
    for (int i = 1; i < V; i++)
        if (p[i] > p[b]) b = i;
    return b;
}
static int ref_verify(int mode, int g, int V, const float *p, const float *q, const int *draft, const sd_verify_uniforms *u,
                      int *out) {
    double w[VMAX];
    int n;
    for (n = 0; n < g; n++) {
        const float *pr = p + n * V;
        int t;
        if (mode == SPECDEC_VERIFY_REJECTION) {
            double px = pr[draft[n]], qx = q[n * V + draft[n]];
            double ratio = px <= 0 ? 0 : (qx <= 0 ? INFINITY : px / qx);
            if (ratio >= 1 || u->accept[n] <= ratio) {
                out[n] = draft[n];
                continue;
            }
            double D = 0;
            for (int j = 0; j < V; j++) D += fmax(0.0, (double)pr[j] - (double)q[n * V + j]);
            for (int j = 0; j < V; j++) w[j] = D > 0 ? fmax(0.0, (double)pr[j] - (double)q[n * V + j]) / D : pr[j];
            out[n] = ref_invcdf(w, V, u->sample[n]);
            return n;
        }
        if (mode == SPECDEC_VERIFY_GREEDY) {
            t = ref_argmax(pr, V);
        } else {
            for (int j = 0; j < V; j++) w[j] = pr[j];
            t = ref_invcdf(w, V, u->sample[n]);
        }
        out[n] = t;
        if (t != draft[n]) return n;
    }
    const float *pr = p + g * V;
    if (mode == SPECDEC_VERIFY_GREEDY) {
        out[g] = ref_argmax(pr, V);
    } else {
        for (int j = 0; j < V; j++) w[j] = pr[j];
        out[g] = ref_invcdf(w, V, u->sample[g]);
    }
    return g;
}

static void random_row(float *row, int V, float *scratch_logits, void *scratch, size_t ss) {
    for (int i = 0; i < V; i++) scratch_logits[i] = (float)((unit() - 0.5) * 8);
    int kind = below(6);
    sd_sampling_params sp = {1.0f, 0, 1.0f, 0.0f};
    if (kind == 1) sp.top_k = 1 + below(V);
    if (kind == 2) sp.top_p = 0.5f;
    if (kind == 3) sp.temperature = 0.0f;
    if (kind == 4) sp.min_p = 0.2f;
    sd_sampling_process(scratch_logits, V, &sp, scratch, ss, row, NULL);
}

static void test_random_cases(void) {
    static float p[(GMAX + 1) * VMAX], q[GMAX * VMAX], logits[VMAX];
    static char scratch[1 << 14];
    int draft[GMAX], out[GMAX + 1], rout[GMAX + 1];
    long cases = 0, mism = 0, accepted = 0, rejected = 0;
    const double specials[] = {0x1p-32, 1.0, 0.5, 0.25, 1.0 - 0x1p-32};
    for (int c = 0; c < 60000; c++) {
        int V = 1 + below(VMAX), g = below(9);
        int mode = 1 + below(3);
        int same = below(8) == 0; /* q == p */
        for (int i = 0; i <= g; i++) random_row(p + i * V, V, logits, scratch, sizeof scratch);
        for (int i = 0; i < g; i++) {
            if (same) memcpy(q + i * V, p + i * V, sizeof(float) * (size_t)V);
            else random_row(q + i * V, V, logits, scratch, sizeof scratch);
        }
        sd_verify_uniforms u;
        for (int i = 0; i < g; i++) u.accept[i] = below(20) ? unit() : specials[below(5)];
        for (int i = 0; i <= g; i++) u.sample[i] = below(20) ? unit() : specials[below(5)];
        for (int i = 0; i < g; i++) {
            int r = below(10);
            if (r < 7) draft[i] = sd_sample_inverse_cdf(q + i * V, V, unit()); /* x ~ q */
            else if (r < 9) draft[i] = below(V);                                 /* arbitrary, may have q = 0 */
            else draft[i] = mode == SPECDEC_VERIFY_REJECTION ? sd_sample_inverse_cdf(p + i * V, V, unit())
                                                            : sd_sample_inverse_cdf(p + i * V, V, u.sample[i]);
        }
        int n = -1;
        specdec_status st = sd_verify((specdec_verify_mode)mode, g, V, p, q, draft, &u, out, &n, NULL);
        int rn = ref_verify(mode, g, V, p, q, draft, &u, rout);
        cases++;
        int bad = st != SPECDEC_OK || n != rn || memcmp(out, rout, sizeof(int) * (size_t)(rn + 1)) != 0;
        /* the emitted token never has zero target probability, and ids are in range */
        if (!bad) {
            for (int i = 0; i <= n; i++) bad |= out[i] < 0 || out[i] >= V;
            if (!bad && mode != SPECDEC_VERIFY_GREEDY) bad |= p[n * V + out[n]] <= 0;
        }
        if (bad && mism++ < 5)
            fprintf(stderr, "case %d mode %d V %d g %d: n %d vs ref %d, last %d vs %d\n", c, mode, V, g, n, rn,
                    n >= 0 ? out[n] : -1, rout[rn]);
        accepted += n;
        rejected += n < g;
    }
    printf("injected-uniform cases: %ld, mismatches %ld (accepted %ld tokens, %ld rejections)\n", cases, mism, accepted,
           rejected);
    SD_CHECK(mism == 0, "%ld cases differ from the fp64 reference", mism);
    SD_CHECK(accepted > 10000 && rejected > 10000, "case mix too one-sided");
}

static void test_edges(void) {
    /* p == q with a zero residual: rejection cannot happen, and a forced one (r past
     * the boundary is impossible since r <= 1) is covered by falling back to p. */
    float p[3 * 4] = {0.25f, 0.25f, 0.25f, 0.25f, 0, 1, 0, 0, 0.5f, 0.5f, 0, 0};
    float q[2 * 4] = {0.25f, 0.25f, 0.25f, 0.25f, 0, 1, 0, 0};
    int draft[2] = {3, 1}, out[3], n;
    sd_verify_uniforms u = {{1.0, 1.0}, {0.3, 0.3, 0.7}};
    SD_CHECK(sd_verify(SPECDEC_VERIFY_REJECTION, 2, 4, p, q, draft, &u, out, &n, NULL) == SPECDEC_OK, "ok");
    SD_CHECK(n == 2 && out[0] == 3 && out[1] == 1 && out[2] == 1, "p == q accepts even r = 1: n %d t %d", n, out[2]);
    /* p(x) = 0: never accepted even with q(x) = 0 and r tiny; residual excludes x */
    float p2[2 * 3] = {0.5f, 0.5f, 0, 0.2f, 0.3f, 0.5f};
    float q2[3] = {0.5f, 0, 0.5f};
    int d2[1] = {2};
    sd_verify_uniforms u2 = {{0x1p-32}, {0.99, 0.5}};
    sd_verify(SPECDEC_VERIFY_REJECTION, 1, 3, p2, q2, d2, &u2, out, &n, NULL);
    SD_CHECK(n == 0 && out[0] == 1, "p(x)=0 rejected, residual gives token 1 (got n %d t %d)", n, out[0]);
    /* q(x) = 0 < p(x): accepted (ratio infinite) */
    d2[0] = 1;
    sd_verify(SPECDEC_VERIFY_REJECTION, 1, 3, p2, q2, d2, &u2, out, &n, NULL);
    SD_CHECK(n == 1 && out[0] == 1, "q(x)=0<p(x) accepted");
    /* p == q exactly, forced rejection via injected r > 1: residual all zero → sample p, no NaN */
    float p3[2 * 2] = {0.5f, 0.5f, 1, 0}, q3[2] = {0.5f, 0.5f};
    sd_verify_uniforms u3 = {{2.0}, {0.9, 0.1}};
    int d3[1] = {0};
    sd_verify(SPECDEC_VERIFY_REJECTION, 1, 2, p3, q3, d3, &u3, out, &n, NULL);
    SD_CHECK(n == 0 && out[0] == 1, "zero residual falls back to p (n %d t %d)", n, out[0]);
    /* gamma 0 = plain step in every mode */
    float p4[5] = {0.1f, 0.2f, 0.3f, 0.4f, 0};
    sd_verify_uniforms u4 = {{0}, {0.35}};
    sd_verify(SPECDEC_VERIFY_REJECTION, 0, 5, p4, NULL, NULL, &u4, out, &n, NULL);
    SD_CHECK(n == 0 && out[0] == 2, "gamma 0 rejection");
    sd_verify(SPECDEC_VERIFY_MATCH, 0, 5, p4, NULL, NULL, &u4, out, &n, NULL);
    SD_CHECK(n == 0 && out[0] == 2, "gamma 0 match");
    sd_verify(SPECDEC_VERIFY_GREEDY, 0, 5, p4, NULL, NULL, NULL, out, &n, NULL);
    SD_CHECK(n == 0 && out[0] == 3, "gamma 0 greedy");
}

static void test_errors(void) {
    float p[8] = {1, 0, 0, 0, 1, 0, 0, 0}, q[4] = {1, 0, 0, 0};
    int d[1] = {0}, bad[1] = {4}, neg[1] = {-1}, out[2] = {-7, -7}, n = -7;
    sd_verify_uniforms u = {{0.5}, {0.5, 0.5}};
    struct {
        int mode, g, V;
        const float *p, *q;
        const int *d;
        const sd_verify_uniforms *u;
        int *out, *n;
    } c[] = {
        {SPECDEC_VERIFY_AUTO, 1, 4, p, q, d, &u, out, &n},      {7, 1, 4, p, q, d, &u, out, &n},
        {SPECDEC_VERIFY_REJECTION, -1, 4, p, q, d, &u, out, &n}, {SPECDEC_VERIFY_REJECTION, GMAX + 1, 4, p, q, d, &u, out, &n},
        {SPECDEC_VERIFY_REJECTION, 1, 0, p, q, d, &u, out, &n},  {SPECDEC_VERIFY_REJECTION, 1, 4, NULL, q, d, &u, out, &n},
        {SPECDEC_VERIFY_REJECTION, 1, 4, p, NULL, d, &u, out, &n}, {SPECDEC_VERIFY_REJECTION, 1, 4, p, q, NULL, &u, out, &n},
        {SPECDEC_VERIFY_REJECTION, 1, 4, p, q, d, NULL, out, &n}, {SPECDEC_VERIFY_MATCH, 1, 4, p, q, d, NULL, out, &n},
        {SPECDEC_VERIFY_REJECTION, 1, 4, p, q, d, &u, NULL, &n},  {SPECDEC_VERIFY_REJECTION, 1, 4, p, q, d, &u, out, NULL},
        {SPECDEC_VERIFY_REJECTION, 1, 4, p, q, bad, &u, out, &n}, {SPECDEC_VERIFY_GREEDY, 1, 4, p, q, neg, &u, out, &n},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        specdec_status st = sd_verify((specdec_verify_mode)c[i].mode, c[i].g, c[i].V, c[i].p, c[i].q, c[i].d, c[i].u,
                                      c[i].out, c[i].n, NULL);
        SD_CHECK(st == SPECDEC_ERR_INVALID_ARGUMENT, "bad call %zu accepted", i);
        SD_CHECK(strstr(specdec_last_error(), "verify:") != NULL, "detail %zu: %s", i, specdec_last_error());
    }
    SD_CHECK(out[0] == -7 && out[1] == -7 && n == -7, "outputs untouched on failure");
    SD_CHECK(sd_verify(SPECDEC_VERIFY_GREEDY, 1, 4, p, NULL, d, NULL, out, &n, NULL) == SPECDEC_OK, "greedy needs no q/u");
}

/* fetch_uniforms addresses absolute positions */
static void test_fetch(void) {
    sd_verify_uniforms u;
    sd_verify_fetch_uniforms(5, 9, 100, 4, &u);
    int bad = 0;
    for (int i = 0; i < 4; i++) bad += u.accept[i] != sd_rng_uniform_at(5, 9, 100 + i, SD_RNG_PURPOSE_ACCEPT);
    for (int i = 0; i <= 4; i++) bad += u.sample[i] != sd_rng_uniform_at(5, 9, 100 + i, SD_RNG_PURPOSE_SAMPLE);
    SD_CHECK(bad == 0, "fetch_uniforms addressing");
    SD_CHECK(u.accept[0] != u.accept[1] && u.sample[0] != u.accept[0], "slots distinct");
    float q[4] = {0.25f, 0.25f, 0.25f, 0.25f};
    for (int64_t pos = 0; pos < 200; pos++) {
        bad += sd_verify_draft_sample(SPECDEC_VERIFY_MATCH, q, 4, 5, 9, pos) !=
               sd_sample_inverse_cdf(q, 4, sd_rng_uniform_at(5, 9, pos, SD_RNG_PURPOSE_SAMPLE));
        bad += sd_verify_draft_sample(SPECDEC_VERIFY_REJECTION, q, 4, 5, 9, pos) !=
               sd_sample_inverse_cdf(q, 4, sd_rng_uniform_at(5, 9, pos, SD_RNG_PURPOSE_DRAFT));
        bad += sd_verify_target_sample(SPECDEC_VERIFY_MATCH, q, 4, 5, 9, pos) !=
               sd_sample_inverse_cdf(q, 4, sd_rng_uniform_at(5, 9, pos, SD_RNG_PURPOSE_SAMPLE));
    }
    float g[4] = {0.1f, 0.4f, 0.4f, 0.1f};
    bad += sd_verify_draft_sample(SPECDEC_VERIFY_GREEDY, g, 4, 5, 9, 0) != 1;
    bad += sd_verify_target_sample(SPECDEC_VERIFY_GREEDY, g, 4, 5, 9, 0) != 1;
    SD_CHECK(bad == 0, "draft/target sample helpers: %d mismatches", bad);
}

/* ---- coupled decoding on Markov-chain models: row = f(previous token) ---- */
enum { MV = 24 };
static float Pm[MV][MV], Qm[MV][MV];

static void make_chain(float m[MV][MV], float T, int top_k, float noise, const float base[MV][MV]) {
    static char scratch[1 << 12];
    float l[MV];
    sd_sampling_params sp = {T, top_k, 0.95f, 0.0f};
    for (int a = 0; a < MV; a++) {
        for (int b = 0; b < MV; b++) l[b] = base ? base[a][b] + noise * (float)(unit() - 0.5) : (float)((unit() - 0.5) * 6);
        sd_sampling_process(l, MV, &sp, scratch, sizeof scratch, m[a], NULL);
    }
}

static int plain_decode(int mode, uint64_t seed, uint64_t seq, int first, int L, int *outseq) {
    int prev = first;
    for (int pos = 1; pos < L; pos++) {
        outseq[pos] = sd_verify_target_sample((specdec_verify_mode)mode, Pm[prev], MV, seed, seq, pos);
        prev = outseq[pos];
    }
    return L;
}

static long spec_decode(int mode, uint64_t seed, uint64_t seq, int first, int L, int gamma, int *outseq) {
    float p[(GMAX + 1) * MV], q[GMAX * MV];
    int draft[GMAX], out[GMAX + 1], n;
    long acc = 0;
    int len = 1; /* outseq[0] = first: the prompt */
    outseq[0] = first;
    while (len < L) {
        int prev = outseq[len - 1];
        for (int i = 0; i < gamma; i++) { /* draft proposes positions len..len+gamma-1 */
            memcpy(q + i * MV, Qm[prev], sizeof(float) * MV);
            draft[i] = sd_verify_draft_sample((specdec_verify_mode)mode, Qm[prev], MV, seed, seq, len + i);
            prev = draft[i];
        }
        prev = outseq[len - 1];
        for (int i = 0; i <= gamma; i++) { /* target rows along the drafted prefix */
            memcpy(p + i * MV, Pm[prev], sizeof(float) * MV);
            if (i < gamma) prev = draft[i];
        }
        sd_verify_uniforms u;
        sd_verify_fetch_uniforms(seed, seq, len, gamma, &u);
        if (sd_verify((specdec_verify_mode)mode, gamma, MV, p, q, draft, &u, out, &n, NULL) != SPECDEC_OK) return -1;
        acc += n;
        for (int i = 0; i <= n && len < L; i++) outseq[len++] = out[i];
    }
    return acc;
}

static void test_coupled(void) {
    static float base[MV][MV];
    make_chain(Pm, 1.0f, 0, 0, NULL);
    long mism = 0, total_acc = 0, runs = 0;
    const int L = 80;
    int a[L], b[L];
    for (int draftkind = 0; draftkind < 3; draftkind++) {
        /* draft: an unrelated chain, a noisy copy of the target's logits, the target itself */
        for (int x = 0; x < MV; x++)
            for (int y = 0; y < MV; y++) base[x][y] = logf(Pm[x][y] + 1e-6f);
        if (draftkind == 0) make_chain(Qm, 1.3f, 8, 0, NULL);
        if (draftkind == 1) make_chain(Qm, 1.0f, 0, 1.0f, base);
        if (draftkind == 2) memcpy(Qm, Pm, sizeof Pm);
        for (int gamma = 1; gamma <= GMAX; gamma += (gamma < 4 ? 1 : 6))
            for (uint64_t seq = 0; seq < 40; seq++) {
                int first = (int)(seq % MV);
                plain_decode(SPECDEC_VERIFY_MATCH, 777, seq, first, L, a);
                a[0] = first;
                long acc = spec_decode(SPECDEC_VERIFY_MATCH, 777, seq, first, L, gamma, b);
                runs++;
                total_acc += acc;
                if (acc < 0 || memcmp(a, b, sizeof a) != 0) mism++;
                if (draftkind == 2 && acc >= 0) {
                    /* identical draft: every draft token must be accepted in match mode */
                    int rounds = (L - 1 + gamma) / (gamma + 1);
                    if (acc < (long)(L - 1) - rounds) mism++;
                }
            }
    }
    printf("coupled decoding: %ld runs, %ld differ from plain decoding, %ld drafts accepted\n", runs, mism, total_acc);
    SD_CHECK(mism == 0, "match mode differs from plain decoding in %ld runs", mism);
    SD_CHECK(total_acc > 1000, "suspiciously few acceptances");
    /* greedy: speculative == plain greedy */
    make_chain(Pm, 0.0f, 0, 0, NULL);
    make_chain(Qm, 1.0f, 0, 0, NULL);
    for (int x = 0; x < MV; x++) /* greedy draft rows: one-hot argmax of a related chain */
        for (int y = 0; y < MV; y++) Qm[x][y] = (y == (x * 7 + (x % 3 == 0 ? 0 : 1)) % MV) ? 1.0f : 0.0f;
    mism = 0;
    for (int gamma = 1; gamma <= 6; gamma++)
        for (uint64_t seq = 0; seq < 10; seq++) {
            plain_decode(SPECDEC_VERIFY_GREEDY, 1, seq, (int)seq, L, a);
            a[0] = (int)seq;
            spec_decode(SPECDEC_VERIFY_GREEDY, 1, seq, (int)seq, L, gamma, b);
            if (memcmp(a, b, sizeof a) != 0) mism++;
        }
    SD_CHECK(mism == 0, "greedy speculative differs from greedy plain in %ld runs", mism);
}

int main(void) {
    test_random_cases();
    test_edges();
    test_errors();
    test_fetch();
    test_coupled();
    return sd_test_done();
}
