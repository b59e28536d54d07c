/* test_rng.c — sd_rng: Philox4x32-10 known-answer vectors (Random123 kat_vectors),
 * cuRAND state semantics (curand_init subsequence/offset layout, skipahead, word
 * stepping, carries), the uniform conversions, slot addressing, and a uniformity
 * check. Bit equality with cuRAND on a GPU is checked by the CUDA tests. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "sd_rng.h"
#include "sd_test.h"
#include "vstats.h"

static void test_kat(void) {
    static const struct {
        uint32_t ctr[4], key[2], out[4];
    } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
        {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
         {0xffffffffu, 0xffffffffu},
         {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
        {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
         {0xa4093822u, 0x299f31d0u},
         {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
    };
    for (size_t i = 0; i < sizeof kat / sizeof kat[0]; i++) {
        uint32_t out[4];
        sd_rng_philox4x32_10(kat[i].ctr, kat[i].key, out);
        for (int j = 0; j < 4; j++)
            SD_CHECK(out[j] == kat[i].out[j], "KAT %zu word %d: %08x != %08x", i, j, out[j], kat[i].out[j]);
    }
    /* curand_init(0, 0, 0) then curand() x4 = the all-zero KAT block, then counter 1. */
    sd_philox_state s;
    sd_rng_init(&s, 0, 0, 0);
    SD_CHECK(sd_rng_next_u32(&s) == 0x6627e8d5u, "first word of seed 0");
    SD_CHECK(sd_rng_next_u32(&s) == 0xe169c58du, "second word");
    SD_CHECK(sd_rng_next_u32(&s) == 0xbc57ac4cu, "third word");
    SD_CHECK(sd_rng_next_u32(&s) == 0x9b00dbd8u, "fourth word");
    uint32_t c1[4] = {1, 0, 0, 0}, k0[2] = {0, 0}, o1[4];
    sd_rng_philox4x32_10(c1, k0, o1);
    SD_CHECK(sd_rng_next_u32(&s) == o1[0], "fifth word is block of counter 1");
}

/* curand_init layout: key = seed halves, subsequence in ctr.z/w, offset/4 in ctr.x/y,
 * offset%4 = first word. */
static void test_layout(void) {
    const uint64_t seeds[] = {0, 1, 0x123456789abcdef0ull, ~0ull};
    const uint64_t subs[] = {0, 1, 7, 0xfffffffful, 0x100000000ull, 0xdeadbeefcafef00dull};
    const uint64_t offs[] = {0, 1, 2, 3, 4, 5, 1023, 0x3fffffffcull, 0x400000001ull, 0xfffffffffffffff3ull};
    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < 6; b++)
            for (size_t c = 0; c < 10; c++) {
                sd_philox_state s;
                sd_rng_init(&s, seeds[a], subs[b], offs[c]);
                uint64_t blk = offs[c] / 4;
                uint32_t ctr[4] = {(uint32_t)blk, (uint32_t)(blk >> 32), (uint32_t)subs[b], (uint32_t)(subs[b] >> 32)};
                uint32_t key[2] = {(uint32_t)seeds[a], (uint32_t)(seeds[a] >> 32)};
                uint32_t out[4];
                sd_rng_philox4x32_10(ctr, key, out);
                uint32_t got = sd_rng_next_u32(&s);
                SD_CHECK(got == out[offs[c] % 4], "layout seed %zu sub %zu off %zu", a, b, c);
            }
}

/* Offset stepping: init(seed, sub, off) yields word `off` of the stream init(seed, sub, 0);
 * skipahead(n) after k draws equals init at k + n. */
static void test_stepping(void) {
    enum { N = 300 };
    uint32_t stream[N];
    sd_philox_state s;
    sd_rng_init(&s, 0x5eedull, 3, 0);
    for (int i = 0; i < N; i++) stream[i] = sd_rng_next_u32(&s);
    int bad = 0;
    for (int off = 0; off < N - 20; off++) {
        sd_rng_init(&s, 0x5eedull, 3, (uint64_t)off);
        for (int j = 0; j < 20; j++)
            if (sd_rng_next_u32(&s) != stream[off + j]) bad++;
    }
    SD_CHECK(bad == 0, "offset stepping: %d mismatches", bad);
    bad = 0;
    for (int k = 0; k < 9; k++)
        for (int n = 0; n < 40; n++) {
            sd_rng_init(&s, 0x5eedull, 3, 0);
            for (int i = 0; i < k; i++) sd_rng_next_u32(&s);
            sd_rng_skipahead(&s, (uint64_t)n);
            if (sd_rng_next_u32(&s) != stream[k + n]) bad++;
        }
    SD_CHECK(bad == 0, "skipahead after draws: %d mismatches", bad);
    /* subsequence = 2^66 words: skipahead_sequence(1) from init(seed, 3, off) == init(seed, 4, off) */
    sd_philox_state a, b;
    sd_rng_init(&a, 99, 3, 10);
    sd_rng_skipahead_sequence(&a, 1);
    sd_rng_init(&b, 99, 4, 10);
    SD_CHECK(sd_rng_next_u32(&a) == sd_rng_next_u32(&b), "skipahead_sequence");
    /* carry of the low 64 bits into the high half when stepping past 2^64 - 1 blocks */
    sd_rng_init(&a, 7, 5, 0xfffffffffffffffcull); /* block 2^62 - 1: no carry */
    sd_rng_init(&b, 7, 5, 0);
    (void)b;
    for (int i = 0; i < 4; i++) sd_rng_next_u32(&a);
    uint32_t ctr[4] = {0u, 0x40000000u, 5u, 0u}, key[2] = {7u, 0u}, out[4];
    sd_rng_philox4x32_10(ctr, key, out);
    SD_CHECK(sd_rng_next_u32(&a) == out[0], "increment across 32-bit word");
    /* full 64-bit wrap: ctr.x/y = ~0 then Philox_State_Incr carries into z */
    sd_philox_state w;
    memset(&w, 0, sizeof w);
    w.ctr[0] = w.ctr[1] = 0xffffffffu;
    w.ctr[2] = 5;
    w.key[0] = 7;
    sd_rng_philox4x32_10(w.ctr, w.key, w.output);
    for (int i = 0; i < 4; i++) sd_rng_next_u32(&w);
    SD_CHECK(w.ctr[0] == 0 && w.ctr[1] == 0 && w.ctr[2] == 6 && w.ctr[3] == 0, "128-bit increment carry");
}

static void test_uniform(void) {
    SD_CHECK(sd_rng_u32_to_uniform(0) == ldexpf(1.0f, -33), "float u(0) = 2^-33");
    SD_CHECK(sd_rng_u32_to_uniform(0xffffffffu) == 1.0f, "float u(max) = 1");
    SD_CHECK(sd_rng_u32_to_uniform(1u << 31) == 0.5f, "float u(2^31) = 0.5 (2^-33 lost to rounding)");
    SD_CHECK(sd_rng_u32_to_uniform(3) == (float)(3.5 * ldexp(1.0, -32)), "float u(3)");
    SD_CHECK(sd_rng_u32_to_uniform_double(0) == ldexp(1.0, -32), "double u(0) = 2^-32");
    SD_CHECK(sd_rng_u32_to_uniform_double(0xffffffffu) == 1.0, "double u(max) = 1");
    SD_CHECK(sd_rng_u32_to_uniform_double(12345) == 12346.0 * ldexp(1.0, -32), "double u = (x+1)/2^32");
    /* the float conversion rounds (float)x to nearest even like __uint2float_rn */
    uint32_t x = 0x01000001u; /* 2^24 + 1: not representable, rounds to 2^24 */
    SD_CHECK(sd_rng_u32_to_uniform(x) == (float)(16777216.0 * ldexp(1.0, -32)) + ldexpf(1.0f, -33),
             "float u rounds x first");
    sd_philox_state s, t;
    sd_rng_init(&s, 42, 1, 5);
    sd_rng_init(&t, 42, 1, 5);
    for (int i = 0; i < 10; i++) {
        float f = sd_rng_next_uniform(&s);
        SD_CHECK(f == sd_rng_u32_to_uniform(sd_rng_next_u32(&t)), "next_uniform draw %d", i);
    }
    sd_rng_init(&s, 42, 1, 5);
    sd_rng_init(&t, 42, 1, 5);
    for (int i = 0; i < 10; i++) {
        double d = sd_rng_next_uniform_double(&s);
        SD_CHECK(d == sd_rng_u32_to_uniform_double(sd_rng_next_u32(&t)), "next_uniform_double draw %d", i);
    }
}

/* Slot addressing: sd_rng_u32_at == curand_init(seed, seq, offset(pos, purpose)) + curand(),
 * distinct slots give distinct words. */
static void test_slots(void) {
    int bad = 0;
    for (int64_t pos = 0; pos < 50; pos++)
        for (int pur = 0; pur < SD_RNG_PURPOSES; pur++) {
            sd_philox_state s;
            sd_rng_init(&s, 0xabcdef12345ull, 77, sd_rng_offset(pos, pur));
            uint32_t w = sd_rng_next_u32(&s);
            if (w != sd_rng_u32_at(0xabcdef12345ull, 77, pos, pur)) bad++;
            if (sd_rng_uniform_at(0xabcdef12345ull, 77, pos, pur) != sd_rng_u32_to_uniform_double(w)) bad++;
        }
    SD_CHECK(bad == 0, "slot addressing: %d mismatches", bad);
    SD_CHECK(sd_rng_offset(3, 2) == (3 * 8 + 2) * 4, "offset formula");
    SD_CHECK(sd_rng_u32_at(1, 0, 5, 0) != sd_rng_u32_at(1, 1, 5, 0), "sequence ids differ");
    SD_CHECK(sd_rng_u32_at(1, 0, 5, 0) != sd_rng_u32_at(2, 0, 5, 0), "seeds differ");
    SD_CHECK(sd_rng_u32_at(1, 0, 5, 0) != sd_rng_u32_at(1, 0, 5, 1), "purposes differ");
    SD_CHECK(sd_rng_u32_at(1, 0, 5, 0) != sd_rng_u32_at(1, 0, 6, 0), "positions differ");
}

/* Uniformity: H0 = slot words are uniform; 256 bins of the top byte and 256 bins of the
 * low byte over 2^20 slots (positions x purposes x sequences), Pearson chi-square,
 * alpha = 1e-6 per test. */
static void test_uniformity(void) {
    static double top[256], low[256];
    const int n = 1 << 20;
    for (int i = 0; i < n; i++) {
        uint32_t w = sd_rng_u32_at(2024, (uint64_t)(i >> 12), (i >> 3) & 511, i & 7);
        top[w >> 24] += 1;
        low[w & 255] += 1;
    }
    double e = n / 256.0, x1 = 0, x2 = 0;
    for (int b = 0; b < 256; b++) {
        x1 += (top[b] - e) * (top[b] - e) / e;
        x2 += (low[b] - e) * (low[b] - e) / e;
    }
    double p1 = chi2_sf(x1, 255), p2 = chi2_sf(x2, 255);
    printf("uniformity: chi2 top %.1f (p %.3g), low %.1f (p %.3g), df 255, n %d\n", x1, p1, x2, p2, n);
    SD_CHECK(p1 > 1e-6 && p2 > 1e-6, "uniformity rejected at 1e-6");
    SD_CHECK(fabs(chi2_sf(255.0, 255.0) - 0.4883) < 2e-3, "chi2_sf sanity %g", chi2_sf(255.0, 255.0));
}

int main(void) {
    test_kat();
    test_layout();
    test_stepping();
    test_uniform();
    test_slots();
    test_uniformity();
    return sd_test_done();
}
