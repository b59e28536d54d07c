/* sd_cpu_swiglu.h — the gated MLP activation of Llama: out = silu(gate) * up.
 *
 * Elementwise over m values (m = n_tokens * intermediate):
 *     out[i] = (float)( g / (1 + exp(-g)) * u ),  g = gate[i], u = up[i] in double.
 * out may alias gate or up. The projections around it are sd_cpu_matmul calls:
 * gate = x W_gate^T, up = x W_up^T, y = out W_down^T. */
#ifndef SD_CPU_SWIGLU_H
#define SD_CPU_SWIGLU_H

#include <stdint.h>

void sd_cpu_swiglu(const float *gate, const float *up, int64_t m, float *out);

/* Residual connection: x[i] += y[i] for i < m (in fp32, as the model adds in its dtype). */
void sd_cpu_add(float *x, const float *y, int64_t m);

#endif
