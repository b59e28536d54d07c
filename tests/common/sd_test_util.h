/* sd_test_util.h — small helpers shared by several test areas (header-only, plain C):
 * the splitmix64 step behind the tests' seeded RNGs, and a monotonic clock in seconds.
 * sd_test_now_s() needs clock_gettime: it exists when the including file defines
 * _POSIX_C_SOURCE >= 199309L before its first system header. */
#ifndef SD_TEST_UTIL_H
#define SD_TEST_UTIL_H

#include <stdint.h>
#include <time.h>

/* splitmix64: advances *s and returns the next word (fixed-seed, platform-independent). */
static inline uint64_t sd_test_splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#ifdef CLOCK_MONOTONIC
static inline double sd_test_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
#endif

#endif
