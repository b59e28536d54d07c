/* sd_cuda_common.cuh — shared by the .cu files: the CUDA check macros and the device
 * helpers that load weights / cache entries of any sd_dtype as fp32.
 *
 * SD_CUDA_TRY(eb, stmt): run a CUDA runtime call; on error record statement, file and
 * line in eb and return the mapped status (never aborts).
 * SD_CUDA_LAUNCHED(eb, what): cudaGetLastError() right after a kernel launch. */
#ifndef SD_CUDA_COMMON_CUH
#define SD_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "sd_cuda_ops.h"
#include "sd_math.h"

#define SD_CUDA_TRY(eb, stmt)                                                        \
    do {                                                                             \
        cudaError_t sd_e_ = (stmt);                                                  \
        if (sd_e_ != cudaSuccess) return sd_cuda_fail((eb), sd_e_, #stmt, __FILE__, __LINE__); \
    } while (0)

#define SD_CUDA_LAUNCHED(eb, what)                                                   \
    do {                                                                             \
        cudaError_t sd_e_ = cudaGetLastError();                                      \
        if (sd_e_ != cudaSuccess) return sd_cuda_fail((eb), sd_e_, what, __FILE__, __LINE__); \
    } while (0)

#define SD_CUBLAS_TRY(eb, stmt)                                                      \
    do {                                                                             \
        cublasStatus_t sd_s_ = (stmt);                                               \
        if (sd_s_ != CUBLAS_STATUS_SUCCESS) return sd_cublas_fail((eb), sd_s_, #stmt, __FILE__, __LINE__); \
    } while (0)

/* Storage types of the three dtypes: raw 16-bit words for F16/BF16 so conversion is
 * the sd_math.h bit code, identical to the CPU reference. */
struct sd_f16_t { uint16_t v; };
struct sd_bf16_t { uint16_t v; };

static __device__ __forceinline__ float sd_ld(const float *p, size_t i) { return p[i]; }
static __device__ __forceinline__ float sd_ld(const sd_f16_t *p, size_t i) { return sd_f16_to_f32(p[i].v); }
static __device__ __forceinline__ float sd_ld(const sd_bf16_t *p, size_t i) { return sd_bf16_to_f32(p[i].v); }

/* Element i of a buffer whose dtype is only known at run time (uniform branch). */
static __device__ __forceinline__ float sd_ld_dt(const void *p, sd_dtype dt, size_t i) {
    if (dt == SD_BF16) return sd_bf16_to_f32(((const uint16_t *)p)[i]);
    if (dt == SD_F16) return sd_f16_to_f32(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}
static __device__ __forceinline__ void sd_st_dt(void *p, sd_dtype dt, size_t i, float v) {
    if (dt == SD_BF16) ((uint16_t *)p)[i] = sd_f32_to_bf16(v);
    else if (dt == SD_F16) ((uint16_t *)p)[i] = sd_f32_to_f16(v);
    else ((float *)p)[i] = v;
}

static inline unsigned sd_cdiv(size_t a, size_t b) { return (unsigned)((a + b - 1) / b); }

#endif
