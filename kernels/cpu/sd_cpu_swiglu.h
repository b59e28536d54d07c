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

/* The gated MLP with activation act (sd_act: SiLU, GELU-tanh for GeGLU, GELU):
 * out[i] = (float)(act(gate[i]) * up[i]) in double; SiLU is sd_cpu_swiglu. */
void sd_cpu_glu(int32_t act, const float *gate, const float *up, int64_t m, float *out);

/* GPT-OSS's clamped SwiGLU over gate_up [m, 2] (gate and up interleaved: the layout of its
 * fused expert projection), in double:
 *     g = min(gu[2i], limit), u = clamp(gu[2i + 1], -limit, limit)
 *     out[i] = (float)( (u + 1) * g / (1 + exp(-alpha * g)) )
 * out may alias gu (out[i] is written after gu[2i], gu[2i + 1] are read, and i <= 2i). */
void sd_cpu_swiglu_clamped(const float *gu, int64_t m, double alpha, double limit, float *out);

/* Soft-capping in place: x[i] = (float)(cap * tanh(x[i] / cap)) in double (cap > 0). */
void sd_cpu_softcap(float *x, int64_t m, double cap);

/* Scaling in place: x[i] = x[i] * s in fp32 (the embedding scale of Gemma). */
void sd_cpu_scale(float *x, int64_t m, float s);

/* Division in place: x[i] = x[i] / d in fp32 (Granite's logits / logits_scaling). */
void sd_cpu_div(float *x, int64_t m, float d);

/* Clamping in place: x[i] = min(max(x[i], -lim), lim) (OLMoE's clip_qkv; lim > 0). */
void sd_cpu_clamp(float *x, int64_t m, float lim);

/* Residual connection: x[i] += y[i] for i < m (in fp32, as the model adds in its dtype). */
void sd_cpu_add(float *x, const float *y, int64_t m);

#endif
