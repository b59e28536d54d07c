/* sd_hostdev.h — the one host/device marker of specdec.
 *
 * SD_HD declares a small function that compiles for the host (cc: static inline) and,
 * under nvcc, for both host and device (static __host__ __device__ __forceinline__).
 * Header-only code shared by the CPU reference and the CUDA kernels (core/sd_math.h,
 * core/sd_sample_rules.h, core/sd_rng.h's slot addressing) uses it, so both sides run
 * the same source and, where the functions are built from IEEE-exact operations, get
 * the same bits.
 *
 * SD_HD_FORCE is SD_HD that the host compiler must inline too (always_inline): the bit
 * conversions the CPU kernels' sanitizer-uninstrumented loops call (kernels/cpu/
 * sd_cpu_sanitize.h). GCC does not inline a function into one whose sanitizer attributes
 * differ unless it is always_inline, and an out-of-line f16 conversion per element made the
 * ASan build's row conversion 10x slower. */
#ifndef SD_HOSTDEV_H
#define SD_HOSTDEV_H

#if defined(__CUDACC__)
#define SD_HD static __host__ __device__ __forceinline__
#define SD_HD_FORCE SD_HD
#else
#define SD_HD static inline
#define SD_HD_FORCE static inline __attribute__((always_inline))
#endif

#endif
