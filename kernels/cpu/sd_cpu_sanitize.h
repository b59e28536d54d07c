/* sd_cpu_sanitize.h — which sanitizer instruments this build, and whole-range checks for the
 * hot loops of the CPU forward pass.
 *
 * Under AddressSanitizer every load of a dot product carries a shadow-memory check (and under
 * UBSan a pointer-overflow check); under ThreadSanitizer every load is a runtime call. Those
 * per-element checks were ~3/4 of the sanitized test stages' time (perf on logprobs_engine under
 * ASan: sd_cpu_matmul 52 %, sd_cpu_dequant 31 %, sd_cpu_matmul_rows 13 %).
 *
 * So a hot loop over contiguous memory is written as an SD_CPU_UNINSTRUMENTED function, and its
 * caller checks the loop's whole ranges first with sd_cpu_check_read / sd_cpu_check_write:
 *  - ASan: __asan_region_is_poisoned finds the first poisoned byte of the range, and an
 *    instrumented one-byte access to it produces the ordinary report (heap-buffer-overflow, use
 *    after free, ...) with the caller's stack. The same bytes are checked as by per-element
 *    checks, once per loop instead of once per element.
 *  - TSan: the range is reported as one read / write (__tsan_read_range / __tsan_write_range,
 *    exported by GCC's and clang's runtimes), so a race on any byte of it is still seen.
 *  - UBSan: the loop's own index arithmetic is not checked; the callers compute the ranges, and
 *    their arithmetic is.
 * In other builds the checks are empty and SD_CPU_UNINSTRUMENTED is `inline`: the loops compile as
 * before.
 * A loop may be marked only if it touches exactly the ranges its caller checks (tests/kernels
 * test_cpu_sanitize shows an overflow by one element is still reported). */
#ifndef SD_CPU_SANITIZE_H
#define SD_CPU_SANITIZE_H

#include <stddef.h>
#include <stdint.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SD_CPU_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define SD_CPU_TSAN 1
#endif
#if __has_feature(memory_sanitizer)
#define SD_CPU_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(SD_CPU_ASAN)
#define SD_CPU_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__) && !defined(SD_CPU_TSAN)
#define SD_CPU_TSAN 1
#endif
#if (defined(SD_CPU_ASAN) || defined(SD_CPU_TSAN)) && !defined(SD_CPU_SANITIZED)
#define SD_CPU_SANITIZED 1
#endif

#if defined(SD_CPU_ASAN)
#include <sanitizer/asan_interface.h>
#define SD_CPU_UNINSTRUMENTED __attribute__((noinline, unused, no_sanitize("address", "undefined")))
static inline void sd_cpu_check_read(const void *p, size_t bytes) {
    const volatile char *bad = (const volatile char *)__asan_region_is_poisoned((void *)(uintptr_t)p, bytes);
    if (bad) (void)*bad; /* instrumented: ASan reports this byte */
}
static inline void sd_cpu_check_write(void *p, size_t bytes) {
    volatile char *bad = (volatile char *)__asan_region_is_poisoned(p, bytes);
    if (bad) *bad = 0; /* instrumented: ASan reports this byte before the store */
}
#elif defined(SD_CPU_TSAN)
void __tsan_read_range(void *addr, unsigned long size);
void __tsan_write_range(void *addr, unsigned long size);
#define SD_CPU_UNINSTRUMENTED __attribute__((noinline, unused, no_sanitize("thread")))
static inline void sd_cpu_check_read(const void *p, size_t bytes) { __tsan_read_range((void *)(uintptr_t)p, bytes); }
static inline void sd_cpu_check_write(void *p, size_t bytes) { __tsan_write_range(p, bytes); }
#else
#define SD_CPU_UNINSTRUMENTED inline
static inline void sd_cpu_check_read(const void *p, size_t bytes) { (void)p, (void)bytes; }
static inline void sd_cpu_check_write(void *p, size_t bytes) { (void)p, (void)bytes; }
#endif

#endif
