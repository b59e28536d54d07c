/* sd_cpu_rope.h — rotary position embedding, Hugging Face rotate_half convention.
 *
 * Frequencies: inv_freq[i] = sd_rope_inv_freq(rp, i) for i < d/2 (core/sd_math.h:
 * theta^(-2i/d), with llama3 scaling when configured), computed in double.
 * Table for position p: cos[i] = (float)cos(p * inv_freq[i]), sin likewise, the
 * product and the trig in double, rounded once to fp32. The GPU may upload these
 * very tables to get bitwise-identical angles.
 * Rotation of one head vector x[0..d), h = d/2 (cat(freqs, freqs) in HF):
 *     x'[i]     = x[i]     * cos[i] - x[i + h] * sin[i]
 *     x'[i + h] = x[i + h] * cos[i] + x[i]     * sin[i]      (double, rounded once)
 * applied to every head of q [n_heads, d] and k [n_kv_heads, d] of a token. */
#ifndef SD_CPU_ROPE_H
#define SD_CPU_ROPE_H

#include <stdint.h>
#include "sd_math.h"

/* inv_freq[0..d/2) for rp. */
void sd_cpu_rope_inv_freq(const sd_rope_params *rp, double *inv_freq);
/* The same for any rope type (sd_rope_spec: linear, yarn, longrope, ...). */
void sd_cpu_rope_spec_inv_freq(const sd_rope_spec *rs, double *inv_freq);

/* cos/sin tables [d/2] of absolute position pos. */
void sd_cpu_rope_table(const double *inv_freq, int32_t half, int32_t pos, float *cos_out, float *sin_out);

/* Rotate x [n_heads, head_dim] in place with the tables of its position. */
void sd_cpu_rope(float *x, int32_t n_heads, int32_t head_dim, const float *cos_t, const float *sin_t);

/* Partial rotary embedding (Phi-3 partial_rotary_factor): only the first rot_dim
 * elements of each head rotate (pairs i, i + rot_dim/2 with tables of rot_dim/2
 * entries); the rest pass through. rot_dim == head_dim is sd_cpu_rope. */
void sd_cpu_rope_part(float *x, int32_t n_heads, int32_t head_dim, int32_t rot_dim, const float *cos_t,
                      const float *sin_t);

/* The same with interleaved pairs (cfg.rope_interleaved: ERNIE 4.5, GLM): pair i is (2i, 2i + 1),
 * i < rot_dim / 2, rotated by the tables' entry i, in the same arithmetic (transformers: the
 * frequencies repeat_interleave'd, rotate_half over x[0::2], x[1::2]); the rest pass through. */
void sd_cpu_rope_part_interleaved(float *x, int32_t n_heads, int32_t head_dim, int32_t rot_dim, const float *cos_t,
                                  const float *sin_t);

/* The tables with transformers' attention scaling (yarn, longrope): cos[i] =
 * (float)(cos(p * inv_freq[i]) * scale), sin likewise; scale 1 is sd_cpu_rope_table. */
void sd_cpu_rope_table_scaled(const double *inv_freq, int32_t half, int32_t pos, double scale, float *cos_out,
                              float *sin_out);

#endif
