/* sd_cuda_rope.cu — RoPE (rotate_half, llama3 scaling via the tables) on q and k, and
 * the KV-cache append (CPU reference: sd_cpu_rope + the cache copy of sd_cpu_runner).
 *
 * Shapes: qkv [n, ldqkv] fp32 = per token q [n_heads*hd] | k [n_kv*hd] | v [n_kv*hd];
 * cos_t, sin_t [n_ctx, hd/2] fp32 (built on the host with sd_cpu_rope_table, so the
 * angles are bitwise those of the CPU reference); caches [n_kv][n_ctx][hd] in kv_dt.
 * For token m at p = pos0 + m, half h = hd/2, each head x of q and k:
 *   x'[i] = x[i] cos[p,i] - x[i+h] sin[p,i];  x'[i+h] = x[i+h] cos[p,i] + x[i] sin[p,i]
 *   (in double, rounded once to fp32)
 * then k_cache[g][p] = k'_g, v_cache[g][p] = v_g (rounded to kv_dt). With pos_dev the
 * base position is read on the device (p = *pos_dev + pos0 + m: CUDA-graph replay).
 * Launch: grid n, 256 threads; thread t handles rotary pairs and v elements strided.
 * The kernel takes the launcher's argument struct by value and names its fields as
 * __restrict__ locals, so the aliasing facts (and the generated code) are those of
 * plain __restrict__ parameters. */
#include "sd_cuda_common.cuh"

static __global__ void sd_rope_kv_kernel(sd_cuda_rope_args a) {
    float *__restrict__ qkv = a.qkv;
    const int32_t ldqkv = a.ldqkv, n_heads = a.n_heads, n_kv = a.n_kv, hd = a.hd, n_ctx = a.n_ctx;
    int32_t pos0 = a.pos0;
    const int64_t *__restrict__ pos_dev = a.pos_dev;
    const float *__restrict__ cos_t = a.cos_t;
    const float *__restrict__ sin_t = a.sin_t;
    void *k_cache = a.k_cache, *v_cache = a.v_cache;
    const sd_dtype kv_dt = a.kv_dt;
    const int m = blockIdx.x;
    if (pos_dev) pos0 += (int32_t)*pos_dev; /* graph replay: the position lives on the device */
    const int p = pos0 + m;
    const int half = hd / 2;
    float *row = qkv + (size_t)m * ldqkv;
    const float *cs = cos_t + (size_t)p * half;
    const float *sn = sin_t + (size_t)p * half;
    const int n_pairs = (n_heads + n_kv) * half;
    for (int t = threadIdx.x; t < n_pairs; t += blockDim.x) {
        const int head = t / half; /* 0..n_heads-1: q heads; then k heads */
        const int i = t - head * half;
        float *x = row + (size_t)head * hd;
        const float x0 = x[i], x1 = x[i + half];
        const float c = cs[i], s = sn[i];
        /* In double, rounded once, as the CPU reference. */
        const float y0 = (float)((double)x0 * c - (double)x1 * s);
        const float y1 = (float)((double)x1 * c + (double)x0 * s);
        if (head < n_heads) {
            x[i] = y0;
            x[i + half] = y1;
        } else {
            const int g = head - n_heads;
            const size_t dst = ((size_t)g * n_ctx + p) * hd;
            sd_st_dt(k_cache, kv_dt, dst + i, y0);
            sd_st_dt(k_cache, kv_dt, dst + i + half, y1);
        }
    }
    const float *v = row + (size_t)(n_heads + n_kv) * hd;
    for (int t = threadIdx.x; t < n_kv * hd; t += blockDim.x) {
        const int g = t / hd, d = t - g * hd;
        sd_st_dt(v_cache, kv_dt, ((size_t)g * n_ctx + p) * hd + d, v[t]);
    }
}

extern "C" specdec_status sd_cuda_rope_kv(const sd_cuda_rope_args *a, cudaStream_t stream, sd_errbuf *eb) {
    if (!a) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_rope_kv: NULL args");
    if (a->n <= 0) return SPECDEC_OK;
    if (a->pos_dev) {
        if (a->hd <= 0 || (a->hd & 1) || a->n > a->n_ctx)
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT,
                           "sd_cuda_rope_kv (device position): head_dim %d, %d tokens, n_ctx %d", (int)a->hd,
                           (int)a->n, (int)a->n_ctx);
    } else if (a->hd <= 0 || (a->hd & 1) || a->pos0 < 0 || a->pos0 + a->n > a->n_ctx) {
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_rope_kv: head_dim %d, positions %d..%d, n_ctx %d",
                       (int)a->hd, (int)a->pos0, (int)(a->pos0 + a->n), (int)a->n_ctx);
    }
    sd_rope_kv_kernel<<<(unsigned)a->n, 256, 0, stream>>>(*a);
    SD_CUDA_LAUNCHED(eb, a->pos_dev ? "sd_rope_kv_kernel(dpos)" : "sd_rope_kv_kernel");
    return SPECDEC_OK;
}
