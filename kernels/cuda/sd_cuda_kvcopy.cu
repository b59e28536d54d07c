/* sd_cuda_kvcopy.cu — row moves inside the paged KV cache: tree compaction (CPU
 * reference: cpu_compact in backends/cpu/sd_cpu_runner.c, a memcpy per row and layer).
 *
 * Shapes: n_mats matrices [n_kv][cache_rows][hd] in kv_dt, mat_stride elements apart
 * from `cache` (K and V of every layer); moves [n_moves][2] = (from, to) physical rows.
 * For i = 0 .. n_moves - 1 in order: M[g][to_i][d] = M[g][from_i][d] for every matrix,
 * kv head g and d (raw bits, no conversion).
 * Launch: grid (n_mats * n_kv), min(hd, 128) threads; thread t owns the elements
 * d = t, t + blockDim, ... of one (matrix, head) and applies ALL moves to them in order.
 * A later move may read a row an earlier one wrote, or write a row an earlier one read
 * (compaction moves keep[j] -> j with keep[] increasing), and the per-element order
 * makes that safe without any barrier. */
#include "sd_cuda_common.cuh"

template <typename T>
static __global__ void sd_kv_copy_kernel(sd_cuda_kv_copy_args a) {
    T *__restrict__ mat = (T *)a.cache + (size_t)(blockIdx.x / a.n_kv) * a.mat_stride;
    const int32_t *__restrict__ moves = a.moves;
    const size_t head = (size_t)(blockIdx.x % a.n_kv) * (size_t)a.cache_rows * (size_t)a.hd;
    for (int d = threadIdx.x; d < a.hd; d += blockDim.x)
        for (int32_t i = 0; i < a.n_moves; i++) {
            const size_t from = head + (size_t)moves[2 * i] * a.hd + d;
            const size_t to = head + (size_t)moves[2 * i + 1] * a.hd + d;
            mat[to] = mat[from];
        }
}

extern "C" specdec_status sd_cuda_kv_copy(const sd_cuda_kv_copy_args *a, cudaStream_t stream, sd_errbuf *eb) {
    if (!a) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_kv_copy: NULL args");
    if (a->n_moves <= 0) return SPECDEC_OK;
    if (!a->cache || !a->moves || a->n_mats <= 0 || a->n_kv <= 0 || a->hd <= 0 || a->cache_rows <= 0 ||
        (int64_t)a->n_mats * a->n_kv > 0x7fffffff)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_kv_copy: %d matrices, %d kv heads, head_dim %d, %d rows",
                       (int)a->n_mats, (int)a->n_kv, (int)a->hd, (int)a->cache_rows);
    const unsigned blocks = (unsigned)(a->n_mats * a->n_kv), threads = a->hd < 128 ? (unsigned)a->hd : 128u;
    if (a->kv_dt == SD_F32) sd_kv_copy_kernel<float><<<blocks, threads, 0, stream>>>(*a);
    else sd_kv_copy_kernel<uint16_t><<<blocks, threads, 0, stream>>>(*a);
    SD_CUDA_LAUNCHED(eb, "sd_kv_copy_kernel");
    return SPECDEC_OK;
}
