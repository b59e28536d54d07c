/* sd_cuda_launch.h — per-device "once" flags of the launchers (issue 24 (e)), plain C,
 * header-only, so CPU tests (tests/cuda/test_cuda_launch_model.c) run the same code.
 *
 * Some launch set-up is a property of a (kernel, DEVICE) pair, not of the process: the
 * dynamic shared-memory opt-in (cudaFuncSetAttribute applies to the current device
 * only), the occupancy and co-residency a launch plan is built from. A process-wide
 * flag set by the first launch on device 0 made every later launch on device 1 skip
 * the opt-in (and fail with "too many resources requested"). A sd_cuda_dev_once holds
 * one flag per device id; a device id outside [0, SD_CUDA_MAX_DEVICES) is never cached
 * (its set-up runs on every launch, still correct).
 *
 * Threads: the flags are read and written with relaxed atomics. Two threads may both
 * see "needed" and both run the set-up; callers make the set-up idempotent (the same
 * attribute value every time, e.g. the largest shared memory the kernel can ever ask
 * for), so that race is harmless. Static storage starts all-zero: nothing to
 * initialise. */
#ifndef SD_CUDA_LAUNCH_H
#define SD_CUDA_LAUNCH_H

#define SD_CUDA_MAX_DEVICES 64
#define SD_CUDA_SMEM_DEFAULT (48 * 1024) /* dynamic shared memory a launch gets without opting in */

typedef struct sd_cuda_dev_once {
    int done[SD_CUDA_MAX_DEVICES];
} sd_cuda_dev_once;

/* 1: the per-device set-up must run before a launch on `dev`. */
static inline int sd_cuda_once_needed(const sd_cuda_dev_once *o, int dev) {
    if (dev < 0 || dev >= SD_CUDA_MAX_DEVICES) return 1;
    return !__atomic_load_n(&o->done[dev], __ATOMIC_ACQUIRE);
}

/* The set-up of `dev` ran successfully. */
static inline void sd_cuda_once_done(sd_cuda_dev_once *o, int dev) {
    if (dev >= 0 && dev < SD_CUDA_MAX_DEVICES) __atomic_store_n(&o->done[dev], 1, __ATOMIC_RELEASE);
}

#endif
