/* sd_alloc.c — allocation wrappers with failure injection for tests. */
#include "sd_alloc.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Atomic because the scheduler's threads allocate concurrently (a plain counter would
 * be a data race); relaxed: injection needs no ordering with anything else. */
static atomic_long sd_fail_at = -1;
static atomic_long sd_count = 0;

static int sd_should_fail(void) {
    long k = atomic_fetch_add_explicit(&sd_count, 1, memory_order_relaxed);
    long at = atomic_load_explicit(&sd_fail_at, memory_order_relaxed);
    return at >= 0 && k == at;
}

void sd_alloc_fail_after(long k) {
    atomic_store_explicit(&sd_fail_at, k, memory_order_relaxed);
    atomic_store_explicit(&sd_count, 0, memory_order_relaxed);
}

long sd_alloc_count(void) { return atomic_load_explicit(&sd_count, memory_order_relaxed); }

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
