/* sd_cuda_rope.cu — RoPE (rotate_half, llama3 scaling via the tables) on q and k, and
 * the KV-cache append (CPU reference: sd_cpu_rope + the cache copy of sd_cpu_runner).
 *
 * Shapes: qkv [n, ldqkv] fp32 = per token q [n_heads*hd] | k [n_kv*hd] | v [n_kv*hd];
 * cos_t, sin_t [n_ctx, hd/2] fp32 (built on the host with sd_cpu_rope_table, so the
 * angles are bitwise those of the CPU reference); caches [n_kv][cache_rows][hd] in
 * kv_dt. Token m has position p and write row w (sd_cuda_keymap.h: a chain token
 * p = w = pos0 (+ *pos_dev) + m; a tree node p = base + depth, w = base + node), half
 * h = hd/2, each head x of q and k:
 *   x'[i] = x[i] cos[p,i] - x[i+h] sin[p,i];  x'[i+h] = x[i+h] cos[p,i] + x[i] sin[p,i]
 *   (in double, rounded once to fp32)
 * then k_cache[g][phys(w)] = k'_g, v_cache[g][phys(w)] = v_g (rounded to kv_dt), phys
 * through the token's block table. Partial rotary (rot_dim < hd, Phi-3/4): h = rot_dim/2
 * and the tables hold rot_dim/2 angles; dims [rot_dim, hd) pass through. interleaved (ERNIE 4.5,
 * GLM-4): pair i is (2i, 2i + 1) instead of (i, i + h), the same angles (core/sd_math.h
 * sd_rope_pair / sd_rope_turn, the CPU reference's own functions).
 * Launch: grid n, 256 threads; thread t handles rotary pairs and v elements strided.
 * The kernel takes the launcher's argument struct by value and names its fields as
 * __restrict__ locals, so the aliasing facts (and the generated code) are those of
 * plain __restrict__ parameters. */
#include "sd_cuda_common.cuh"

static __global__ void sd_rope_kv_kernel(const __grid_constant__ sd_cuda_rope_args a) {
    float *__restrict__ qkv = a.qkv;
    const int32_t ldqkv = a.ldqkv, n_heads = a.n_heads, n_kv = a.n_kv, hd = a.hd;
    const size_t rows = (size_t)a.cache_rows;
    const float *__restrict__ cos_t = a.cos_t;
    const float *__restrict__ sin_t = a.sin_t;
    void *k_cache = a.k_cache, *v_cache = a.v_cache;
    const sd_dtype kv_dt = a.kv_dt;
    const int m = blockIdx.x;
    const int32_t base = sd_keymap_base(&a.map); /* graph replay: a chain's position lives on the device */
    const sd_cuda_tok tk = sd_keymap_tok(&a.map, m, base);
    const size_t w = (size_t)sd_keymap_phys(tk.table, a.map.block_tokens, tk.wrow);
    const int rot = a.rot_dim > 0 ? a.rot_dim : hd, half = rot / 2;
    float *row = qkv + (size_t)m * ldqkv;
    const float *cs = cos_t + (size_t)tk.pos * half;
    const float *sn = sin_t + (size_t)tk.pos * half;
    const int n_pairs = (n_heads + n_kv) * half;
    for (int t = threadIdx.x; t < n_pairs; t += blockDim.x) {
        const int head = t / half; /* 0..n_heads-1: q heads; then k heads */
        const int i = t - head * half;
        int32_t i0, i1; /* (i, i + half), or (2i, 2i + 1) interleaved: core/sd_math.h, as the CPU reference */
        sd_rope_pair(i, half, a.interleaved, &i0, &i1);
        float *x = row + (size_t)head * hd;
        float y0, y1; /* in double, rounded once */
        sd_rope_turn(x[i0], x[i1], cs[i], sn[i], &y0, &y1);
        if (head < n_heads) {
            x[i0] = y0;
            x[i1] = y1;
        } else {
            const int g = head - n_heads;
            const size_t dst = ((size_t)g * rows + w) * hd;
            sd_st_dt(k_cache, kv_dt, dst + i0, y0);
            sd_st_dt(k_cache, kv_dt, dst + i1, y1);
        }
    }
    if (rot < hd) /* k's dims past the rotary ones, unchanged */
        for (int t = threadIdx.x; t < n_kv * (hd - rot); t += blockDim.x) {
            const int g = t / (hd - rot), d = rot + (t - g * (hd - rot));
            sd_st_dt(k_cache, kv_dt, ((size_t)g * rows + w) * hd + d, row[(size_t)(n_heads + g) * hd + d]);
        }
    const float *v = row + (size_t)(n_heads + n_kv) * hd;
    for (int t = threadIdx.x; t < n_kv * hd; t += blockDim.x) {
        const int g = t / hd, d = t - g * hd;
        sd_st_dt(v_cache, kv_dt, ((size_t)g * rows + w) * hd + d, v[t]);
    }
}

extern "C" specdec_status sd_cuda_rope_kv(const sd_cuda_rope_args *a, cudaStream_t stream, sd_errbuf *eb) {
    if (!a) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_rope_kv: NULL args");
    if (a->n <= 0) return SPECDEC_OK;
    const sd_cuda_keymap *k = &a->map;
    const int shape_ok = a->hd > 0 && !(a->hd & 1) && a->n <= a->n_ctx && a->cache_rows > 0 && a->rot_dim >= 0 &&
                         a->rot_dim <= a->hd && !(a->rot_dim & 1);
    int map_ok = 1;
    if (k->tok) map_ok = k->block_tokens >= 1;
    else if (k->table) map_ok = k->block_tokens >= 1 && (k->pos_dev || (k->pos0 >= 0 && k->pos0 + a->n <= a->n_ctx));
    else if (!k->pos_dev) map_ok = k->pos0 >= 0 && k->pos0 + a->n <= a->n_ctx && k->pos0 + a->n <= a->cache_rows;
    else map_ok = a->n_ctx <= a->cache_rows;
    if (!shape_ok || !map_ok)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT,
                       "sd_cuda_rope_kv: head_dim %d, %d tokens, %s mode (pos0 %d, block_tokens %d), n_ctx %d, "
                       "cache rows %d",
                       (int)a->hd, (int)a->n, k->tok ? "general" : k->pos_dev ? "device-position" : "chain",
                       (int)k->pos0, (int)k->block_tokens, (int)a->n_ctx, (int)a->cache_rows);
    sd_rope_kv_kernel<<<(unsigned)a->n, 256, 0, stream>>>(*a);
    SD_CUDA_LAUNCHED(eb, k->pos_dev ? "sd_rope_kv_kernel(dpos)" : "sd_rope_kv_kernel");
    return SPECDEC_OK;
}
