/* sd_mxfp4.h — MXFP4 (OCP Microscaling, FP4 E2M1 elements, E8M0 scales) as the published
 * gpt-oss checkpoints store their experts, decoded to BF16.
 *
 * A row of a [rows, cols] matrix (nn.Linear layout) is cols / 32 blocks of 32 values: per
 * block one scale byte s (2^(s - 127); 0xFF is NaN in E8M0) and 16 bytes of E2M1 codes, the
 * block's even element in the low nibble, the odd one in the high nibble. Code c is
 * (-1)^(c >> 3) * {0, 0.5, 1, 1.5, 2, 3, 4, 6}[c & 7]. In the checkpoint, `<proj>_blocks`
 * U8 [E, rows, cols / 32, 16] and `<proj>_scales` U8 [E, rows, cols / 32]
 * (transformers' integrations/mxfp4.py reads the same bytes).
 *
 * Every decoded value (a code times a power of two in [2^-127, 2^127]) is exactly a BF16
 * value or beyond BF16's range (then +-inf, as transformers' ldexp gives), so the BF16
 * weights equal transformers' dequantized ones bit for bit. Header-only: the loader's. */
#ifndef SD_MXFP4_H
#define SD_MXFP4_H

#include <math.h>
#include <stdint.h>

#include "sd_math.h"

#define SD_MXFP4_BLOCK 32

/* lut[s * 16 + c]: BF16 bits of code c under scale byte s (s < 255). */
static inline void sd_mxfp4_lut(uint16_t lut[255 * 16]) {
    static const float e2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    for (int s = 0; s < 255; s++)
        for (int c = 0; c < 16; c++) {
            const float v = ldexpf(e2m1[c & 7], s - 127);
            lut[s * 16 + c] = sd_f32_to_bf16((c & 8) ? -v : v);
        }
}

/* One row of n_blocks blocks into out[n_blocks * 32]; returns the first block whose scale is
 * 0xFF (NaN: refused by the caller), or -1. */
static inline int64_t sd_mxfp4_row(const uint8_t *blocks, const uint8_t *scales, int64_t n_blocks,
                                   const uint16_t *lut, uint16_t *out) {
    for (int64_t g = 0; g < n_blocks; g++) {
        if (scales[g] == 0xFF) return g;
        const uint16_t *l = lut + (size_t)scales[g] * 16;
        const uint8_t *b = blocks + g * (SD_MXFP4_BLOCK / 2);
        uint16_t *o = out + g * SD_MXFP4_BLOCK;
        for (int j = 0; j < SD_MXFP4_BLOCK / 2; j++) {
            o[2 * j] = l[b[j] & 15];
            o[2 * j + 1] = l[b[j] >> 4];
        }
    }
    return -1;
}

/* ggml's MXFP4 blocks (GGUF type 39: per block the scale byte, then 16 bytes whose low nibbles are elements
 * 0-15 and high nibbles 16-31) of one row into the layout above: blocks[g * 16 ..] and scales[g]. */
static inline void sd_mxfp4_from_ggml(const uint8_t *src, int64_t n_blocks, uint8_t *blocks, uint8_t *scales) {
    for (int64_t g = 0; g < n_blocks; g++) {
        const uint8_t *b = src + g * (1 + SD_MXFP4_BLOCK / 2), *qs = b + 1;
        uint8_t *o = blocks + g * (SD_MXFP4_BLOCK / 2);
        scales[g] = b[0];
        for (int j = 0; j < SD_MXFP4_BLOCK / 2; j++) { /* elements 2j and 2j + 1 */
            const int k0 = 2 * j, k1 = 2 * j + 1;
            const int c0 = k0 < 16 ? qs[k0] & 15 : qs[k0 - 16] >> 4, c1 = k1 < 16 ? qs[k1] & 15 : qs[k1 - 16] >> 4;
            o[j] = (uint8_t)(c0 | c1 << 4);
        }
    }
}

#endif
