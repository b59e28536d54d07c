/* cs_common.h — test data shared by the tests/cuda_sample tests (header-only, plain C):
 * a seeded RNG, logit rows of several kinds (noisy, peaked, exact ties, NaN/Inf, all
 * -inf, several +inf, tiny differences that collide after exp), the sampling
 * parameter grid, and float ulp distance. */
#ifndef CS_COMMON_H
#define CS_COMMON_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "sd_cpu_sample.h"
#include "sd_test_util.h"

typedef struct { uint64_t s; } cs_rng;
static inline uint64_t cs_next(cs_rng *r) { return sd_test_splitmix64(&r->s); }
static inline double cs_unit(cs_rng *r) { return (double)((cs_next(r) >> 11) + 1) * 0x1.0p-53; }
static inline double cs_normal(cs_rng *r) { return sqrt(-2 * log(cs_unit(r))) * cos(6.283185307179586 * cs_unit(r)); }

enum { CS_NOISY, CS_PEAKED, CS_TIES, CS_SPECIAL, CS_ALL_NEGINF, CS_POSINF, CS_COLLIDE, CS_KINDS };
static const char *const cs_kind_name[CS_KINDS] = {"noisy", "peaked", "ties", "nan/inf", "all -inf", "+inf", "collide"};

static inline void cs_logits(cs_rng *r, int kind, float *l, int V) {
    for (int i = 0; i < V; i++) l[i] = (float)(2.0 * cs_normal(r));
    switch (kind) {
    case CS_PEAKED:
        for (int h = 0; h < 8 && h < V; h++) l[cs_next(r) % (uint64_t)V] = (float)(12.0 + cs_normal(r));
        break;
    case CS_TIES: /* few distinct values: long runs of equal weights */
        for (int i = 0; i < V; i++) l[i] = (float)(cs_next(r) % 5);
        break;
    case CS_SPECIAL:
        for (int h = 0; h < 1 + V / 50; h++) {
            l[cs_next(r) % (uint64_t)V] = NAN;
            l[cs_next(r) % (uint64_t)V] = -INFINITY;
        }
        break;
    case CS_ALL_NEGINF:
        for (int i = 0; i < V; i++) l[i] = (i % 3) ? -INFINITY : NAN;
        break;
    case CS_POSINF:
        l[V - 1] = INFINITY;
        l[V / 2] = INFINITY;
        l[0] = NAN;
        break;
    case CS_COLLIDE: /* distinct logits whose weights may collide */
        for (int i = 0; i < V; i++) l[i] = (i & 1) ? 1e-30f * (float)(i % 7) : 0.0f;
        break;
    default:
        break;
    }
}

/* The parameter grid (SPECULATIVE.md's case grid plus min-p and greedy). */
static const sd_sampling_params cs_params[] = {
    {1.0f, 0, 1.0f, 0.0f},  {0.5f, 0, 1.0f, 0.0f}, {2.0f, 0, 1.0f, 0.0f},  {1.0f, 1, 1.0f, 0.0f},
    {1.0f, 5, 1.0f, 0.0f},  {1.0f, 0, 0.5f, 0.0f}, {1.0f, 0, 0.9f, 0.0f},  {0.7f, 5, 0.9f, 0.0f},
    {0.8f, 50, 0.95f, 0.05f}, {1.0f, 0, 1.0f, 0.1f}, {0.0f, 0, 1.0f, 0.0f}, {1.3f, 1000, 0.3f, 0.0f},
};
enum { CS_NPARAMS = sizeof cs_params / sizeof cs_params[0] };

/* Distance in units in the last place between two non-negative floats. */
static inline long cs_ulps(float a, float b) {
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    long d = (long)ia - (long)ib;
    return d < 0 ? -d : d;
}

#endif
