/* markov.h — synthetic "models" for engine tests: sd_runner implementations whose
 * logits come from a Markov chain over a small vocabulary (header-only).
 *
 * order 1: the logits row after token t is table[t].
 * order 2: the logits row at position j is table[hist[j-1] * V + hist[j]], where hist
 *          is the runner's own "KV cache" (the tokens it was fed). Position 0 uses
 *          hist[-1] = 0. A second-order model reads the cache, so an engine that rolls
 *          the cache back wrongly samples from the wrong rows and the distribution
 *          tests catch it.
 * The runner checks the sd_runner contract on every call (0 <= pos <= kv_len,
 * pos + n <= n_ctx, 1 <= n <= max_batch, ids in range) and counts violations in
 * `violations`, which tests require to stay 0. */
#ifndef MARKOV_H
#define MARKOV_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sd_runner.h"

typedef struct mk_runner {
    sd_runner base;
    int order;            /* 1 or 2 */
    const float *table;   /* [V][V] (order 1) or [V*V][V] (order 2) logits, borrowed */
    int32_t *hist;        /* [n_ctx] tokens in the cache */
    long calls;           /* forward calls */
    long tokens;          /* tokens fed */
    long violations;      /* contract violations seen */
    long fail_at_call;    /* >= 0: that call (0-based) fails with fail_status */
    int mutant_stale;     /* test of the tests: positions once written are never overwritten,
                             as if rolling the cache back did not work */
    int32_t high_water;   /* positions [0, high_water) were written at least once */
    specdec_status fail_status;
} mk_runner;

static specdec_status mk_forward(sd_runner *r, const int32_t *tokens, int32_t n, int32_t pos, float *logits) {
    mk_runner *m = (mk_runner *)r;
    const int32_t V = r->n_vocab;
    long call = m->calls++;
    if (m->fail_at_call >= 0 && call == m->fail_at_call)
        return sd_fail(&r->err, m->fail_status, "markov runner: injected failure at call %ld", call);
    if (pos < 0 || pos > r->kv_len || n < 1 || n > r->max_batch || (int64_t)pos + n > r->n_ctx) {
        m->violations++;
        return sd_fail(&r->err, SPECDEC_ERR_INTERNAL, "markov runner: bad call pos %d n %d kv_len %d", (int)pos, (int)n,
                       (int)r->kv_len);
    }
    for (int32_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= V) {
            m->violations++;
            return sd_fail(&r->err, SPECDEC_ERR_INTERNAL, "markov runner: token %d out of range", (int)tokens[i]);
        }
        if (!m->mutant_stale || pos + i >= m->high_water) m->hist[pos + i] = tokens[i];
    }
    if (pos + n > m->high_water) m->high_water = pos + n;
    r->kv_len = pos + n;
    m->tokens += n;
    if (logits) {
        for (int32_t i = 0; i < n; i++) {
            int32_t j = pos + i;
            const float *row;
            if (m->order == 1) {
                row = m->table + (size_t)m->hist[j] * (size_t)V;
            } else {
                int32_t prev = j > 0 ? m->hist[j - 1] : 0;
                row = m->table + ((size_t)prev * (size_t)V + (size_t)m->hist[j]) * (size_t)V;
            }
            memcpy(logits + (size_t)i * (size_t)V, row, (size_t)V * sizeof(float));
        }
    }
    return SPECDEC_OK;
}

static void mk_destroy(sd_runner *r) {
    mk_runner *m = (mk_runner *)r;
    free(m->hist);
    free(m);
}

static const sd_runner_vtbl mk_vtbl = {mk_forward, mk_destroy};

static mk_runner *mk_runner_new(int order, const float *table, int32_t V, int32_t n_ctx, int32_t max_batch) {
    mk_runner *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->hist = calloc((size_t)n_ctx, sizeof(int32_t));
    if (!m->hist) {
        free(m);
        return NULL;
    }
    m->base.vt = &mk_vtbl;
    m->base.backend = SPECDEC_BACKEND_CPU;
    m->base.n_vocab = V;
    m->base.n_ctx = n_ctx;
    m->base.max_batch = max_batch;
    m->order = order;
    m->table = table;
    m->fail_at_call = -1;
    return m;
}

/* splitmix64: test-side random numbers for building tables. */
static uint64_t mk_rand_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double mk_rand_unit(uint64_t *s) { return (double)(mk_rand_u64(s) >> 11) * 0x1.0p-53; }
static double mk_rand_normal(uint64_t *s) {
    double u1 = mk_rand_unit(s), u2 = mk_rand_unit(s);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Fill `rows` rows of V logits: normal(0, scale), each entry -inf with probability
 * p_ninf (but never a whole row). */
static void mk_fill_table(float *t, int32_t rows, int32_t V, double scale, double p_ninf, uint64_t seed) {
    uint64_t s = seed;
    for (int32_t r = 0; r < rows; r++) {
        int finite = 0;
        for (int32_t i = 0; i < V; i++) {
            float x = (float)(scale * mk_rand_normal(&s));
            if (mk_rand_unit(&s) < p_ninf) x = -INFINITY;
            else finite = 1;
            t[(size_t)r * V + i] = x;
        }
        if (!finite) t[(size_t)r * V + (size_t)(mk_rand_u64(&s) % (uint64_t)V)] = 0.0f;
    }
}

#endif
