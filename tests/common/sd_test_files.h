/* sd_test_files.h — whole-file reads and writes for tests, and copying a fixture's file with one
 * text edit (header-only, plain C; uses memmem: define _GNU_SOURCE before the first #include). The
 * edit keeps the length (a safetensors header's data offsets stay valid), so a test can turn a
 * tensor's name, dtype or a config key into what it wants refused. */
#ifndef SD_TEST_FILES_H
#define SD_TEST_FILES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_test.h"

/* The whole file, NUL-terminated (*n: its length), or NULL. The caller frees it. */
static inline char *sd_test_slurp(const char *p, size_t *n) {
    FILE *f = fopen(p, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (b && fread(b, 1, (size_t)len, f) != (size_t)len) free(b), b = NULL;
    fclose(f);
    if (b) b[len] = 0, *n = (size_t)len;
    return b;
}

/* Writes n bytes to p (a failed check otherwise). */
static inline void sd_test_put(const char *p, const void *b, size_t n) {
    FILE *f = fopen(p, "wb");
    SD_CHECK(f && fwrite(b, 1, n, f) == n, "write %s", p);
    if (f) fclose(f);
}

/* src_dir/file copied to dst_dir/file with the first `from` (may be NULL: a plain copy) replaced by
 * `to` of the same length; returns the copy's bytes (the caller frees them, e.g. after more edits
 * and another sd_test_put) or NULL after a failed check. */
static inline char *sd_test_copy_edited(const char *src_dir, const char *dst_dir, const char *file, const char *from,
                                        const char *to, size_t *n) {
    char p[4400];
    snprintf(p, sizeof p, "%.4000s/%s", src_dir, file);
    char *b = sd_test_slurp(p, n);
    SD_CHECK(b != NULL, "read %s", p);
    if (!b) return NULL;
    char *at = from ? memmem(b, *n, from, strlen(from)) : NULL; /* binary: the header follows 8 length bytes */
    SD_CHECK(!from || (at && strlen(from) == strlen(to)), "%s: %s not found (or not %zu bytes)", p, from ? from : "",
             from ? strlen(from) : 0);
    if (at) memcpy(at, to, strlen(to));
    snprintf(p, sizeof p, "%.4000s/%s", dst_dir, file);
    sd_test_put(p, b, *n);
    return b;
}

#endif
