/* fuzz_common.h — shared shape of the fuzz targets: each target file defines
 * sd_fuzz_one() (returns the specdec_status of feeding the input to its entry
 * function) and gets LLVMFuzzerTestOneInput from here. The seed regression runner
 * (seed_runner.c) calls sd_fuzz_one() directly. Invariants of a successful parse are
 * checked with sd_fuzz_require(), which aborts so that libFuzzer reports a crash. */
#ifndef FUZZ_COMMON_H
#define FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int sd_fuzz_one(const uint8_t *data, size_t size);

#define sd_fuzz_require(cond)                                                         \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "fuzz invariant violated: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
            abort();                                                                  \
        }                                                                             \
    } while (0)

#define SD_FUZZ_DEFINE_ENTRY                                                  \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);             \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {            \
        (void)sd_fuzz_one(data, size);                                        \
        return 0;                                                             \
    }

#endif
