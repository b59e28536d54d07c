/* sd_rng.h — counter-based RNG: Philox4x32-10 drawing exactly cuRAND's stream.
 *
 * The generator
 *   sd_rng_init(&s, seed, subsequence, offset) followed by sd_rng_next_u32() /
 *   sd_rng_next_uniform() / sd_rng_next_uniform_double() returns bit for bit what
 *   cuRAND's curand_init(seed, subsequence, offset, &st) followed by curand() /
 *   curand_uniform() / curand_uniform_double() returns for curandStatePhilox4_32_10_t
 *   (CUDA 13 headers curand_kernel.h, curand_philox4x32_x.h, curand_uniform.h):
 *   - key   = { (uint32)seed, (uint32)(seed >> 32) }
 *   - 128-bit counter ctr = {x, y, z, w} (x least significant);
 *     subsequence is added to the high 64 bits (z = low word, w = high word),
 *     offset / 4 is added to the low 64 bits (x, y), and offset % 4 selects which of
 *     the four output words of that Philox block is returned first.
 *   - each curand() returns output[STATE] and moves on; after the 4th word the
 *     counter is incremented by one and the block recomputed.
 *   - curand_uniform():        (float)x * 2^-32f + 2^-33f     in (0, 1]   (float math)
 *   - curand_uniform_double(): (double)x * 2^-32 + 2^-32      in (0, 1]   (exact)
 *   Both are exact functions of the 32-bit word x; the float one rounds (float)x to
 *   nearest even first, as the device __uint2float_rn does, and the product by the
 *   power of two is exact, so a fused multiply-add on the device gives the same float.
 *
 * Addressing in specdec (SPECULATIVE.md: "keyed by (seed, sequence id), addressed by
 * (position, purpose)"): every random decision is one 32-bit word at
 *     subsequence = sequence_id
 *     offset      = (position * SD_RNG_PURPOSES + purpose) * SD_RNG_WORDS_PER_SLOT
 * i.e. each (position, purpose) slot owns one whole Philox block (4 words; specdec
 * uses word 0 and leaves 1..3 for future use), so the Philox counter of a slot is
 *     ctr = { lo32(block), hi32(block), lo32(sequence_id), hi32(sequence_id) },
 *     block = position * SD_RNG_PURPOSES + purpose,
 * and the value is independent of how many numbers anything else consumed.
 * `position` is the absolute index in the sequence of the token the draw decides
 * (prompt length + tokens generated before it), >= 0.
 * The CUDA side reproduces a slot with
 *     curand_init(seed, sequence_id, sd_rng_offset(position, purpose), &st);
 *     double u = curand_uniform_double(&st);
 * All functions here are pure, allocation-free and thread-safe. */
#ifndef SD_RNG_H
#define SD_RNG_H

#include <stdint.h>

#include "sd_hostdev.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Purposes of a draw at one position. Stable numbers: changing them changes every
 * sampled sequence for a given seed. */
typedef enum sd_rng_purpose {
    SD_RNG_PURPOSE_SAMPLE = 0, /* the token emitted at this position by sampling: plain decoding,
                                  coupled ("match") target and draft samples, the rejection
                                  verifier's residual or bonus token */
    SD_RNG_PURPOSE_DRAFT = 1,  /* the draft model's sample in rejection mode */
    SD_RNG_PURPOSE_ACCEPT = 2, /* r_i, the rejection verifier's acceptance test */
    SD_RNG_PURPOSES = 8        /* slots reserved per position (3..7 unused for now) */
} sd_rng_purpose;

#define SD_RNG_WORDS_PER_SLOT 4

/* Philox4x32-10 round constants (Salmon et al. 2011, as in cuRAND). */
#define SD_PHILOX_W32_0 0x9E3779B9u
#define SD_PHILOX_W32_1 0xBB67AE85u
#define SD_PHILOX_M4x32_0 0xD2511F53u
#define SD_PHILOX_M4x32_1 0xCD9E8D57u

/* Mirror of curandStatePhilox4_32_10_t's generator fields (Box-Muller fields omitted). */
typedef struct sd_philox_state {
    uint32_t ctr[4];    /* x, y, z, w */
    uint32_t output[4]; /* Philox block of ctr */
    uint32_t key[2];
    uint32_t state;     /* index 0..3 of the next word of output to return */
} sd_philox_state;

/* The raw bijection: out = Philox4x32-10(ctr, key). ctr/out may alias. */
void sd_rng_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* curand_init(seed, subsequence, offset, s). */
void sd_rng_init(sd_philox_state *s, uint64_t seed, uint64_t subsequence, uint64_t offset);
/* skipahead(n, s): skip n words. */
void sd_rng_skipahead(sd_philox_state *s, uint64_t n);
/* skipahead_sequence(n, s): skip n subsequences of 2^66 words. */
void sd_rng_skipahead_sequence(sd_philox_state *s, uint64_t n);
/* curand(s). */
uint32_t sd_rng_next_u32(sd_philox_state *s);
/* curand_uniform(s): float in (0, 1]. */
float sd_rng_next_uniform(sd_philox_state *s);
/* curand_uniform_double(s): double in (0, 1], a multiple of 2^-32 (32 random bits). */
double sd_rng_next_uniform_double(sd_philox_state *s);

/* The conversions alone (_curand_uniform / _curand_uniform_double of one word). */
float sd_rng_u32_to_uniform(uint32_t x);
double sd_rng_u32_to_uniform_double(uint32_t x);

/* Offset of the first word of slot (position, purpose), as passed to curand_init
 * (host and device). */
SD_HD uint64_t sd_rng_offset(int64_t position, int purpose) {
    return ((uint64_t)position * (uint64_t)SD_RNG_PURPOSES + (uint64_t)purpose) * SD_RNG_WORDS_PER_SLOT;
}

/* The 32-bit word of slot (position, purpose) of stream (seed, sequence_id): one Philox
 * call, equal to curand() after curand_init(seed, sequence_id, sd_rng_offset(...)). */
uint32_t sd_rng_u32_at(uint64_t seed, uint64_t sequence_id, int64_t position, int purpose);
/* sd_rng_u32_to_uniform_double(sd_rng_u32_at(...)): the uniform in (0, 1] every sampling
 * decision in specdec uses (= curand_uniform_double at that slot). */
double sd_rng_uniform_at(uint64_t seed, uint64_t sequence_id, int64_t position, int purpose);

#ifdef __cplusplus
}
#endif

#endif
