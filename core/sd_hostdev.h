/* sd_hostdev.h — the one host/device marker of specdec.
 *
 * SD_HD declares a small function that compiles for the host (cc: static inline) and,
 * under nvcc, for both host and device (static __host__ __device__ __forceinline__).
 * Header-only code shared by the CPU reference and the CUDA kernels (core/sd_math.h,
 * core/sd_sample_rules.h, core/sd_rng.h's slot addressing) uses it, so both sides run
 * the same source and, where the functions are built from IEEE-exact operations, get
 * the same bits. */
#ifndef SD_HOSTDEV_H
#define SD_HOSTDEV_H

#if defined(__CUDACC__)
#define SD_HD static __host__ __device__ __forceinline__
#else
#define SD_HD static inline
#endif

#endif
