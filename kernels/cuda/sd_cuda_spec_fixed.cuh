/* sd_cuda_spec_fixed.cuh — kept for existing includes: the exact fixed-point helpers and
 * the shared exp of the sampling / verify kernels now live in kernels/sd_sample_math.h
 * (host and device, C11 and CUDA), which the CPU reference (runtime/sd_sampling.c,
 * sd_verify.c) uses too, so CPU and GPU compute the same bits. */
#ifndef SD_CUDA_SPEC_FIXED_CUH
#define SD_CUDA_SPEC_FIXED_CUH

#include "sd_sample_math.h"

#endif
