/* sd_alloc.c — allocation wrappers with failure injection for tests. */
#include "sd_alloc.h"

#include <stdlib.h>
#include <string.h>

static long sd_fail_at = -1;
static long sd_count = 0;

static int sd_should_fail(void) {
    long k = sd_count++;
    return sd_fail_at >= 0 && k == sd_fail_at;
}

void sd_alloc_fail_after(long k) {
    sd_fail_at = k;
    sd_count = 0;
}

long sd_alloc_count(void) { return sd_count; }

void *sd_malloc(size_t n) {
    if (sd_should_fail()) return NULL;
    return malloc(n ? n : 1);
}

void *sd_calloc(size_t count, size_t size) {
    if (sd_should_fail()) return NULL;
    if (count == 0 || size == 0) count = size = 1;
    return calloc(count, size);
}

void *sd_realloc(void *p, size_t n) {
    if (sd_should_fail()) return NULL;
    return realloc(p, n ? n : 1);
}

char *sd_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = sd_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

void sd_free(void *p) { free(p); }
