/* test_logprobs_row.c — sd_cpu_logprobs (kernels/cpu/sd_cpu_logprobs.c), the row function
 * every executor uses, against brute force on constructed rows: random rows of several
 * sizes and scales (fixed seeds), rows with ties (top order: the lower id first; rank counts
 * only strictly larger values), large offsets (1e4: the max subtraction keeps it finite),
 * -inf entries (masked ids: logprob -inf, never in the top before finite ids), NaN (counts as
 * -inf), all -inf and +inf rows, top_logprobs clamped to V and to 20, top 0; values that
 * differ in the raw logit but round to the same reported float (the raw-value prefilters of
 * the rank and top passes), NaN ids filling a top list before finite ids.
 * Brute force: log_softmax in long double (two-pass), rank by counting, top by repeated
 * selection. Tolerance: |diff| <= 4e-7 * max(1, |value|) (one float rounding of a double
 * computation, plus the difference between double and long double accumulation). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_cpu_logprobs.h"
#include "sd_test.h"

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static double urand(void) { /* xorshift64*: [0, 1) */
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (double)((rng * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

/* brute-force value of id i (long double), NaN as -inf */
static long double bf_lp(const float *x, int32_t V, int32_t i) {
    long double m = -INFINITY, s = 0;
    for (int32_t j = 0; j < V; j++)
        if (x[j] > m) m = x[j];
    if (isinf(m) && m > 0) {
        int32_t c = 0;
        for (int32_t j = 0; j < V; j++) c += x[j] == INFINITY;
        return x[i] == INFINITY ? -logl((long double)c) : -INFINITY;
    }
    if (isinf(m) || isnan(x[i])) return -INFINITY;
    for (int32_t j = 0; j < V; j++)
        if (!isnan(x[j])) s += expl((long double)x[j] - m);
    return ((long double)x[i] - m) - logl(s);
}

static int close_to(float got, long double want) {
    if (isinf(want) || isinf(got)) return got == (float)want;
    return fabsl((long double)got - want) <= 4e-7L * (fabsl(want) > 1 ? fabsl(want) : 1);
}

/* one row, every token checked for value and rank, the top list for n_top */
static int check_row(const char *name, const float *x, int32_t V, int32_t n_top) {
    float *v = malloc((size_t)V * sizeof *v);
    int bad = 0;
    sd_logprob lp;
    sd_cpu_logprobs(x, V, 0, n_top, &lp); /* fills the top list: its values are v[] as computed */
    for (int32_t i = 0; i < V; i++) {
        sd_logprob one;
        sd_cpu_logprobs(x, V, i, 0, &one);
        v[i] = one.logprob;
        bad += !close_to(one.logprob, bf_lp(x, V, i)) || one.token != i || one.n_top != 0;
    }
    for (int32_t i = 0; i < V; i++) { /* rank: 1 + ids with a strictly larger reported value */
        sd_logprob one;
        sd_cpu_logprobs(x, V, i, 0, &one);
        int32_t r = 1;
        for (int32_t j = 0; j < V; j++) r += v[j] > v[i];
        bad += one.rank != r;
    }
    int32_t want_top = n_top < V ? n_top : V;
    if (want_top > SPECDEC_MAX_TOP_LOGPROBS) want_top = SPECDEC_MAX_TOP_LOGPROBS;
    bad += lp.n_top != want_top;
    uint8_t *taken = calloc((size_t)V, 1);
    for (int32_t k = 0; k < want_top && k < lp.n_top; k++) { /* selection: the best untaken, lowest id on ties */
        int32_t b = -1;
        for (int32_t j = 0; j < V; j++)
            if (!taken[j] && (b < 0 || v[j] > v[b])) b = j;
        taken[b] = 1;
        bad += lp.top_tokens[k] != b || memcmp(&lp.top_logprobs[k], &v[b], sizeof(float)) != 0;
    }
    free(taken);
    free(v);
    SD_CHECK(bad == 0, "%s (V %d, top %d): %d mismatches", name, (int)V, (int)n_top, bad);
    return bad;
}

int main(void) {
    static const int32_t sizes[] = {1, 2, 7, 64, 600};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        const int32_t V = sizes[s];
        float *x = malloc((size_t)V * sizeof *x);
        for (int scale = 0; scale < 3; scale++) {
            const double amp = scale == 0 ? 1.0 : scale == 1 ? 12.0 : 40.0;
            for (int32_t i = 0; i < V; i++) x[i] = (float)(amp * (2 * urand() - 1) + (scale == 2 ? 1e4 : 0));
            check_row("random", x, V, 5);
            check_row("random top 20", x, V, 20);
            check_row("random top 99 (clamped)", x, V, 99);
            /* ties: values on a coarse grid, so many ids share each value */
            for (int32_t i = 0; i < V; i++) x[i] = (float)floor(4 * urand());
            check_row("ties", x, V, 20);
            /* masked ids and a NaN */
            for (int32_t i = 0; i < V; i++) x[i] = urand() < 0.5 ? -INFINITY : (float)(amp * urand());
            if (V > 3) x[3] = NAN;
            check_row("-inf and NaN", x, V, 20);
        }
        for (int32_t i = 0; i < V; i++) x[i] = -INFINITY;
        check_row("all -inf", x, V, 3);
        for (int32_t i = 0; i < V; i++) x[i] = i % 3 == 1 ? INFINITY : 0.0f;
        check_row("+inf entries", x, V, 3);
        free(x);
    }
    /* values that collapse when rounded: raw values 1e-9 apart near 0 all report about
     * -log(V) (float ulp there ~5e-7), so rank and top ties come from rounding, not from
     * equal raw values (the raw-value prefilters must not split them); and a row spanning
     * several blocks of the third pass */
    {
        const int32_t V = 1500;
        float *x = malloc((size_t)V * sizeof *x);
        for (int32_t i = 0; i < V; i++) x[i] = (float)(1e-6 * urand());
        check_row("rounding ties", x, V, 20);
        for (int32_t i = 0; i < V; i++) x[i] = (float)(1e-6 * urand()) + (i % 97 == 5 ? 3.0f : 0.0f);
        check_row("rounding ties, some above", x, V, 20);
        free(x);
    }
    /* a rounding tie across blocks: ids 0..63 at 0, the rest at 1e-7 (raw: larger), all
     * reporting the same value, so the top list is ids 0.. (lower ids first) although the
     * largest raw values are elsewhere (a raw-value block skip would drop ids 0..63) */
    {
        const int32_t V = 1024;
        float *x = malloc((size_t)V * sizeof *x);
        for (int32_t i = 0; i < V; i++) x[i] = i < 64 ? 0.0f : 1e-7f;
        sd_logprob a, b;
        sd_cpu_logprobs(x, V, 0, 0, &a);
        sd_cpu_logprobs(x, V, 64, 0, &b);
        SD_CHECK(a.logprob == b.logprob, "rounding tie across blocks: not a tie (%.9g vs %.9g)", (double)a.logprob,
                 (double)b.logprob);
        check_row("rounding tie across blocks", x, V, 1);
        check_row("rounding tie across blocks, top 20", x, V, 20);
        free(x);
    }
    /* NaN ids fill the list first (ids 0..2), finite ids later must displace them */
    {
        const float x[8] = {NAN, NAN, NAN, 1.0f, -INFINITY, 2.0f, NAN, 0.5f};
        check_row("NaN first", x, 8, 3);
        check_row("NaN first, top 6", x, 8, 6);
    }
    /* a sorted row (the insertion list's worst case) and the monotone order */
    float y[300];
    for (int32_t i = 0; i < 300; i++) y[i] = (float)i * 0.01f;
    check_row("ascending", y, 300, 20);
    sd_logprob lp;
    sd_cpu_logprobs(y, 300, 299, 20, &lp);
    SD_CHECK(lp.rank == 1 && lp.top_tokens[0] == 299 && lp.top_tokens[19] == 280, "ascending: rank %d, top %d..%d",
             (int)lp.rank, (int)lp.top_tokens[0], (int)lp.top_tokens[19]);
    return sd_test_done();
}
