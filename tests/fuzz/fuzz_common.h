/* fuzz_common.h — shared shape of the fuzz targets: each target file defines
 * sd_fuzz_one() (returns the specdec_status of feeding the input to its entry
 * function, or 0) and gets LLVMFuzzerTestOneInput from SD_FUZZ_DEFINE_ENTRY. A target
 * that needs set-up (models, real tokenizers) also defines sd_fuzz_init(), run once
 * before the first input by libFuzzer (LLVMFuzzerInitialize) and by the seed runner;
 * it returns 0, or SD_FUZZ_SKIP when what it needs is absent (then the seed test
 * skips and a libFuzzer run exits with 77). The seed regression runner
 * (seed_runner.c) calls sd_fuzz_one() directly. Invariants are checked with
 * sd_fuzz_require(), which aborts so that libFuzzer reports a crash.
 *
 * sd_fuzz_in is a small structure-aware reader (like LLVM's FuzzedDataProvider): it
 * takes integers, floats and byte strings from the front of the input and yields
 * zeros once the input is used up, so every input decodes to some call. */
#ifndef FUZZ_COMMON_H
#define FUZZ_COMMON_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "specdec.h"

#define SD_FUZZ_SKIP 77

int sd_fuzz_one(const uint8_t *data, size_t size);
int sd_fuzz_init(void);

#define sd_fuzz_require(cond)                                                         \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "fuzz invariant violated: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
            abort();                                                                  \
        }                                                                             \
    } while (0)

#define SD_FUZZ_DEFINE_ENTRY                                                  \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);             \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {            \
        (void)sd_fuzz_one(data, size);                                        \
        return 0;                                                             \
    }

/* For targets with sd_fuzz_init(): also defines LLVMFuzzerInitialize. */
#define SD_FUZZ_DEFINE_ENTRY_WITH_INIT                                        \
    SD_FUZZ_DEFINE_ENTRY                                                      \
    int LLVMFuzzerInitialize(int *argc, char ***argv);                        \
    int LLVMFuzzerInitialize(int *argc, char ***argv) {                       \
        (void)argc;                                                           \
        (void)argv;                                                           \
        int r = sd_fuzz_init();                                               \
        if (r == SD_FUZZ_SKIP) exit(SD_FUZZ_SKIP);                            \
        if (r) {                                                              \
            fprintf(stderr, "fuzz target set-up failed\n");                  \
            exit(1);                                                          \
        }                                                                     \
        return 0;                                                             \
    }

/* ---- a growable byte buffer, NUL-terminated past len (text or binary) ---- */
typedef struct sd_fuzz_buf {
    char *p;
    size_t len, cap;
} sd_fuzz_buf;

static inline void sd_fuzz_buf_put(sd_fuzz_buf *b, const void *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = 2 * (b->len + n + 1) + 64;
        char *p = realloc(b->p, cap);
        sd_fuzz_require(p != NULL);
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

/* ---- structure-aware input reader -------------------------------------- */
typedef struct sd_fuzz_in {
    const uint8_t *p;
    size_t n;
} sd_fuzz_in;

static inline uint8_t sd_fuzz_u8(sd_fuzz_in *in) {
    if (!in->n) return 0;
    in->n--;
    return *in->p++;
}

static inline uint32_t sd_fuzz_u32(sd_fuzz_in *in) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)sd_fuzz_u8(in) << (8 * i);
    return v;
}

static inline uint64_t sd_fuzz_u64(sd_fuzz_in *in) {
    uint64_t lo = sd_fuzz_u32(in);
    return lo | (uint64_t)sd_fuzz_u32(in) << 32;
}

/* An int32 that is often a boundary value: a tag byte picks one of them, a small
 * value, or 4 raw bytes. */
static inline int32_t sd_fuzz_i32(sd_fuzz_in *in) {
    uint8_t t = sd_fuzz_u8(in);
    switch (t % 8) {
    case 0: return (int32_t)(t >> 3);              /* 0..31 */
    case 1: return -(int32_t)(t >> 3) - 1;         /* -1..-32 */
    case 2: return (int32_t)(t >> 3) * 37;         /* 0..1147 */
    case 3: return (t >> 3) & 1 ? INT32_MAX : INT32_MIN;
    case 4: return (t >> 3) & 1 ? INT32_MAX - (int32_t)(t >> 4) : INT32_MIN + (int32_t)(t >> 4);
    default: return (int32_t)sd_fuzz_u32(in);
    }
}

/* A float that is often special: NaN, ±inf, ±0, denormals, boundaries, or raw bits. */
static inline float sd_fuzz_float(sd_fuzz_in *in) {
    static const float special[16] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 1e-30f, 1e30f, 1.0000001f,
                                      0.9999999f, 1e-45f, 3.4e38f, 2.0f, 0.05f, 0.95f, 0.8f, 100.0f};
    uint8_t t = sd_fuzz_u8(in);
    if (t < 16) return special[t];
    if (t < 20) return t == 16 ? NAN : t == 17 ? -NAN : t == 18 ? INFINITY : -INFINITY;
    if (t < 128) return (float)(t - 20) / 100.0f; /* 0 .. 1.07 in steps of 0.01 */
    uint32_t u = sd_fuzz_u32(in);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Up to max bytes, length from one byte (scaled when max > 255); points into the input. */
static inline size_t sd_fuzz_bytes(sd_fuzz_in *in, size_t max, const uint8_t **out) {
    size_t want = sd_fuzz_u8(in);
    if (max > 255) want = want * max / 255;
    if (want > max) want = max;
    if (want > in->n) want = in->n;
    *out = in->p;
    in->p += want;
    in->n -= want;
    return want;
}

/* 1 if s[0..n) is well-formed UTF-8 (no surrogates, no overlongs, <= U+10FFFF). */
static inline int sd_fuzz_utf8_ok(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned c = u[i];
        size_t k;
        unsigned lo = 0x80, hi = 0xBF;
        if (c < 0x80) { i++; continue; }
        if (c >= 0xC2 && c <= 0xDF) k = 1;
        else if (c == 0xE0) { k = 2; lo = 0xA0; }
        else if (c == 0xED) { k = 2; hi = 0x9F; }
        else if (c >= 0xE1 && c <= 0xEF) k = 2;
        else if (c == 0xF0) { k = 3; lo = 0x90; }
        else if (c == 0xF4) { k = 3; hi = 0x8F; }
        else if (c >= 0xF1 && c <= 0xF3) k = 3;
        else return 0;
        if (i + k >= n) return 0; /* truncated sequence */
        for (size_t j = 1; j <= k; j++) {
            unsigned d = u[i + j];
            if (d < (j == 1 ? lo : 0x80) || d > (j == 1 ? hi : 0xBF)) return 0;
        }
        i += k + 1;
    }
    return 1;
}

/* A specdec_token_logprobs record as include/specdec.h documents it, for a vocabulary of V
 * ids: the token and position, a finite logprob <= 0, n_top as asked, the top list most
 * likely first with ties to the lower id and no id twice, the token in it with its own
 * value, and the rank consistent with the list. Shared by fuzz_generate and fuzz_scheduler. */
static inline int sd_fuzz_lp_record_ok(const specdec_token_logprobs *lp, int32_t V, int32_t top_want,
                                       int64_t position) {
    int ok = lp->token >= 0 && lp->token < V && isfinite(lp->logprob) && lp->logprob <= 0.0f && lp->rank >= 1 &&
             lp->rank <= V && lp->n_top == top_want && lp->position == position &&
             (lp->n_top == 0 || (lp->top_tokens && lp->top_logprobs));
    int32_t above = 0, seen = 0; /* entries strictly above the token's logprob; the token in the list */
    for (int32_t k = 0; ok && k < lp->n_top; k++) {
        const int32_t id = lp->top_tokens[k];
        const float v = lp->top_logprobs[k];
        ok = id >= 0 && id < V && isfinite(v) && v <= 0.0f;
        for (int32_t j = 0; ok && j < k; j++) ok = lp->top_tokens[j] != id;
        if (ok && k > 0) {
            const float u = lp->top_logprobs[k - 1];
            ok = u > v || (u == v && lp->top_tokens[k - 1] < id);
        }
        if (ok && id == lp->token) {
            ok = v == lp->logprob;
            seen = 1;
        }
        above += v > lp->logprob;
    }
    if (!ok || lp->n_top == 0) return ok;
    /* the list is the n_top largest values: when its last entry is at or below the token's
     * logprob it holds every id above it (rank = above + 1) and the token itself or a tie */
    const float last = lp->top_logprobs[lp->n_top - 1];
    if (last <= lp->logprob) return lp->rank == above + 1 && (seen || last == lp->logprob);
    return above == lp->n_top && lp->rank > lp->n_top && !seen;
}

#endif
