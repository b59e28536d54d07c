/* sd_cuda_model_ops.cu — the small per-family ops of the forward (CPU references in
 * kernels/cpu: sd_cpu_rmsnorm_off per head, sd_cpu_glu, sd_cpu_softcap, sd_cpu_scale).
 * Every op computes each row (token) on its own, so all are batch invariant.
 *
 * - sd_cuda_head_rmsnorm: Qwen3 / Gemma 3 q_norm and k_norm. qkv [n, ldqkv] fp32 holds
 *   per token q [n_heads*hd] | k [n_kv*hd] | v; every head vector x of q and k becomes
 *   x * rsqrt(mean(x^2) + eps) * w (w = wq for q heads, wk for k heads, fp32 [hd]
 *   with Gemma's (1 + w) folded in by the caller), in place. One warp per (token,
 *   head): lanes stride the head, the sum of squares by a fixed shuffle tree.
 * - sd_cuda_glu: the gated MLP with any activation. gu [n, 2*inter] = gate | up per
 *   row; h[m, j] = act(gate) * up with act SiLU (sd_cuda_swiglu's formula), GELU-tanh
 *   (GeGLU: 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)))) or GELU (erf). Grid
 *   (inter / 256, n).
 * - sd_cuda_softcap: rows x[r * ld + c], r < n, c < cols, become cap * tanh(x / cap)
 *   (Gemma 2's final logits). Grid (cols / 256, n).
 * - sd_cuda_scale: x[i] *= s (Gemma's embedding scale), fp32. */
#include "sd_cuda_common.cuh"

static __global__ void sd_head_rmsnorm_kernel(const __grid_constant__ sd_cuda_head_norm_args a) {
    const int lane = threadIdx.x & 31;
    const int idx = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int heads = a.n_heads + a.n_kv;
    if (idx >= a.n * heads) return;
    const int m = idx / heads, h = idx - m * heads;
    float *x = a.qkv + (size_t)m * a.ldqkv + (size_t)h * a.hd;
    const float *__restrict__ w = h < a.n_heads ? a.wq : a.wk;
    float ss = 0.0f;
    for (int c = lane; c < a.hd; c += 32) ss = fmaf(x[c], x[c], ss);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
    const float r = 1.0f / sqrtf(ss / (float)a.hd + a.eps);
    for (int c = lane; c < a.hd; c += 32) x[c] = x[c] * r * w[c];
}

extern "C" specdec_status sd_cuda_head_rmsnorm(const sd_cuda_head_norm_args *a, cudaStream_t stream, sd_errbuf *eb) {
    if (!a) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_head_rmsnorm: NULL args");
    if (a->n <= 0) return SPECDEC_OK;
    if (a->hd <= 0 || a->n_heads < 0 || a->n_kv < 0 || (size_t)(a->n_heads + 2 * a->n_kv) * a->hd > (size_t)a->ldqkv)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_head_rmsnorm: head_dim %d, heads %d / %d, ld %d",
                       (int)a->hd, (int)a->n_heads, (int)a->n_kv, (int)a->ldqkv);
    const int warps = 4;
    sd_head_rmsnorm_kernel<<<sd_cdiv((size_t)a->n * (a->n_heads + a->n_kv), warps), warps * 32, 0, stream>>>(*a);
    SD_CUDA_LAUNCHED(eb, "sd_head_rmsnorm_kernel");
    return SPECDEC_OK;
}

static __device__ __forceinline__ float sd_act_f(int32_t act, float g) {
    if (act == SD_ACT_GELU_TANH) return 0.5f * g * (1.0f + tanhf(0.7978845608028654f * (g + 0.044715f * g * g * g)));
    if (act == SD_ACT_GELU) return 0.5f * g * (1.0f + erff(g * 0.7071067811865476f));
    return g / (1.0f + expf(-g));
}

static __global__ void sd_glu_kernel(const float *__restrict__ gu, float *__restrict__ h, int32_t inter, int32_t act) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= inter) return;
    const size_t m = blockIdx.y;
    const float g = gu[m * 2 * inter + j];
    const float u = gu[m * 2 * inter + inter + j];
    h[m * inter + j] = sd_act_f(act, g) * u;
}

extern "C" specdec_status sd_cuda_glu(const float *gu, float *h, int32_t n, int32_t inter, int32_t act,
                                      cudaStream_t stream, sd_errbuf *eb) {
    if (n <= 0 || inter <= 0) return SPECDEC_OK;
    if (act < SD_ACT_SILU || act > SD_ACT_GELU)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_glu: activation %d", (int)act);
    dim3 grid(sd_cdiv((size_t)inter, 256), (unsigned)n);
    sd_glu_kernel<<<grid, 256, 0, stream>>>(gu, h, inter, act);
    SD_CUDA_LAUNCHED(eb, "sd_glu_kernel");
    return SPECDEC_OK;
}

static __global__ void sd_softcap_kernel(float *__restrict__ x, size_t ld, int32_t cols, float cap) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    float *v = x + (size_t)blockIdx.y * ld + c;
    *v = cap * tanhf(*v / cap);
}

extern "C" specdec_status sd_cuda_softcap(float *x, int32_t n, size_t ld, int32_t cols, float cap,
                                          cudaStream_t stream, sd_errbuf *eb) {
    if (n <= 0 || cols <= 0) return SPECDEC_OK;
    if (!(cap > 0.0f) || ld < (size_t)cols)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_softcap: cap %g, ld %zu, cols %d", (double)cap, ld,
                       (int)cols);
    dim3 grid(sd_cdiv((size_t)cols, 256), (unsigned)n);
    sd_softcap_kernel<<<grid, 256, 0, stream>>>(x, ld, cols, cap);
    SD_CUDA_LAUNCHED(eb, "sd_softcap_kernel");
    return SPECDEC_OK;
}

static __global__ void sd_scale_kernel(float *__restrict__ x, size_t count, float s) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) x[i] *= s;
}

extern "C" specdec_status sd_cuda_scale(float *x, size_t count, float s, cudaStream_t stream, sd_errbuf *eb) {
    if (count == 0) return SPECDEC_OK;
    sd_scale_kernel<<<sd_cdiv(count, 256), 256, 0, stream>>>(x, count, s);
    SD_CUDA_LAUNCHED(eb, "sd_scale_kernel");
    return SPECDEC_OK;
}
