/* sd_cpu_clones.h — function multi-versioning of hot CPU loops (GNU ifunc): on x86-64 Linux
 * with GCC or clang a function marked SD_CPU_CLONES_AVX2 / SD_CPU_CLONES_FMA is also compiled
 * for that ISA and the best version is picked when the library is loaded. Use it only where
 * every version gives bitwise equal results (the same sequence of IEEE operations; an fma()
 * is correctly rounded whether the libm call or the instruction computes it).
 * Never in sanitizer builds: the ifunc resolver runs while the library is relocated, before
 * the sanitizer's runtime is initialised, and an instrumented resolver crashes every program
 * at start (CI's TSan stage: each test SEGFAULT in 0.00 s). Elsewhere the macros are empty. */
#ifndef SD_CPU_CLONES_H
#define SD_CPU_CLONES_H

#include "sd_cpu_sanitize.h" /* SD_CPU_SANITIZED */

#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && defined(__has_attribute) && \
    !defined(SD_CPU_SANITIZED)
#if __has_attribute(target_clones)
#define SD_CPU_CLONES_AVX2 __attribute__((target_clones("avx2", "default")))
#define SD_CPU_CLONES_FMA __attribute__((target_clones("fma", "default")))
#endif
#endif
#ifndef SD_CPU_CLONES_AVX2
#define SD_CPU_CLONES_AVX2
#define SD_CPU_CLONES_FMA
#endif

#endif
