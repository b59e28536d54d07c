/* sd_rng.c — Philox4x32-10 with cuRAND's state layout and stepping (see sd_rng.h).
 * The counter arithmetic mirrors curand_kernel.h statement for statement, carry
 * quirks included, so any (seed, subsequence, offset) gives cuRAND's exact words. */
#include "sd_rng.h"

static void philox_round(uint32_t c[4], const uint32_t k[2]) {
    uint64_t p0 = (uint64_t)SD_PHILOX_M4x32_0 * c[0];
    uint64_t p1 = (uint64_t)SD_PHILOX_M4x32_1 * c[2];
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    uint32_t r0 = hi1 ^ c[1] ^ k[0];
    uint32_t r2 = hi0 ^ c[3] ^ k[1];
    c[0] = r0;
    c[1] = lo1;
    c[2] = r2;
    c[3] = lo0;
}

void sd_rng_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c[4] = {ctr[0], ctr[1], ctr[2], ctr[3]};
    uint32_t k[2] = {key[0], key[1]};
    for (int r = 0; r < 10; r++) {
        if (r > 0) {
            k[0] += SD_PHILOX_W32_0;
            k[1] += SD_PHILOX_W32_1;
        }
        philox_round(c, k);
    }
    out[0] = c[0];
    out[1] = c[1];
    out[2] = c[2];
    out[3] = c[3];
}

/* Philox_State_Incr(s, n): add n to the low 64 bits with cuRAND's carry handling. */
static void state_incr_n(sd_philox_state *s, uint64_t n) {
    uint32_t nlo = (uint32_t)n;
    uint32_t nhi = (uint32_t)(n >> 32);
    s->ctr[0] += nlo;
    if (s->ctr[0] < nlo) nhi++;
    s->ctr[1] += nhi;
    if (nhi <= s->ctr[1]) return;
    if (++s->ctr[2]) return;
    ++s->ctr[3];
}

/* Philox_State_Incr(s): add one to the 128-bit counter. */
static void state_incr(sd_philox_state *s) {
    if (++s->ctr[0]) return;
    if (++s->ctr[1]) return;
    if (++s->ctr[2]) return;
    ++s->ctr[3];
}

/* Philox_State_Incr_hi(s, n): add n to the high 64 bits. */
static void state_incr_hi(sd_philox_state *s, uint64_t n) {
    uint32_t nlo = (uint32_t)n;
    uint32_t nhi = (uint32_t)(n >> 32);
    s->ctr[2] += nlo;
    if (s->ctr[2] < nlo) nhi++;
    s->ctr[3] += nhi;
}

void sd_rng_skipahead(sd_philox_state *s, uint64_t n) {
    s->state += (uint32_t)(n & 3);
    n /= 4;
    if (s->state > 3) {
        n += 1;
        s->state -= 4;
    }
    state_incr_n(s, n);
    sd_rng_philox4x32_10(s->ctr, s->key, s->output);
}

void sd_rng_skipahead_sequence(sd_philox_state *s, uint64_t n) {
    state_incr_hi(s, n);
    sd_rng_philox4x32_10(s->ctr, s->key, s->output);
}

void sd_rng_init(sd_philox_state *s, uint64_t seed, uint64_t subsequence, uint64_t offset) {
    s->ctr[0] = s->ctr[1] = s->ctr[2] = s->ctr[3] = 0;
    s->key[0] = (uint32_t)seed;
    s->key[1] = (uint32_t)(seed >> 32);
    s->state = 0;
    sd_rng_skipahead_sequence(s, subsequence);
    sd_rng_skipahead(s, offset);
}

uint32_t sd_rng_next_u32(sd_philox_state *s) {
    uint32_t ret = s->output[s->state & 3];
    s->state++;
    if (s->state == 4) {
        state_incr(s);
        sd_rng_philox4x32_10(s->ctr, s->key, s->output);
        s->state = 0;
    }
    return ret;
}

float sd_rng_u32_to_uniform(uint32_t x) {
    /* CURAND_2POW32_INV is the float 2^-32; (float)x rounds to nearest even. */
    const float inv = 2.3283064e-10f;
    return (float)x * inv + inv / 2.0f;
}

double sd_rng_u32_to_uniform_double(uint32_t x) {
    const double inv = 2.3283064365386963e-10; /* 2^-32 exactly */
    return (double)x * inv + inv;
}

float sd_rng_next_uniform(sd_philox_state *s) {
    return sd_rng_u32_to_uniform(sd_rng_next_u32(s));
}

double sd_rng_next_uniform_double(sd_philox_state *s) {
    return sd_rng_u32_to_uniform_double(sd_rng_next_u32(s));
}

uint32_t sd_rng_u32_at(uint64_t seed, uint64_t sequence_id, int64_t position, int purpose) {
    /* Slot offsets are multiples of 4: word 0 of block offset/4, no carries into z/w. */
    uint64_t block = sd_rng_offset(position, purpose) / SD_RNG_WORDS_PER_SLOT;
    uint32_t ctr[4] = {(uint32_t)block, (uint32_t)(block >> 32), (uint32_t)sequence_id,
                       (uint32_t)(sequence_id >> 32)};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    uint32_t out[4];
    sd_rng_philox4x32_10(ctr, key, out);
    return out[0];
}

double sd_rng_uniform_at(uint64_t seed, uint64_t sequence_id, int64_t position, int purpose) {
    return sd_rng_u32_to_uniform_double(sd_rng_u32_at(seed, sequence_id, position, purpose));
}
