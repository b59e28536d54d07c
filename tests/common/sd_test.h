/* sd_test.h — minimal test helpers shared by the C tests (header-only).
 * SD_CHECK(cond, fmt, ...) records a failure and goes on; sd_test_done() prints
 * "N passed, N failed" and returns the exit code. sd_test_skip() prints
 * "skipped: <why>" and returns 77 (CTest SKIP_RETURN_CODE). */
#ifndef SD_TEST_H
#define SD_TEST_H

#include <stdio.h>

static int sd_test_pass_count = 0;
static int sd_test_fail_count = 0;

#define SD_CHECK(cond, ...)                                                       \
    do {                                                                          \
        if (cond) {                                                               \
            sd_test_pass_count++;                                                 \
        } else {                                                                  \
            sd_test_fail_count++;                                                 \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);      \
            fprintf(stderr, __VA_ARGS__);                                         \
            fputc('\n', stderr);                                                  \
        }                                                                         \
    } while (0)

static inline int sd_test_done(void) {
    printf("%d passed, %d failed\n", sd_test_pass_count, sd_test_fail_count);
    return sd_test_fail_count ? 1 : 0;
}

static inline int sd_test_skip(const char *why) {
    printf("skipped: %s\n", why);
    return 77;
}

#endif
