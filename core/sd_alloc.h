/* sd_alloc.h — every host allocation in the library goes through these wrappers so
 * tests can inject failures: sd_alloc_fail_after(k) makes the k-th following
 * allocation (0-based) and only that one return NULL; k < 0 disables injection.
 * Injection is a test facility, off by default; the counters are atomic, so threads
 * allocating concurrently are safe (which allocation fails is then up to timing). */
#ifndef SD_ALLOC_H
#define SD_ALLOC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

void *sd_malloc(size_t n);
void *sd_calloc(size_t count, size_t size);
void *sd_realloc(void *p, size_t n);
char *sd_strdup(const char *s);
void sd_free(void *p);

void sd_alloc_fail_after(long k);
/* Number of allocations attempted since the last sd_alloc_fail_after() call. */
long sd_alloc_count(void);

#ifdef __cplusplus
}
#endif

#endif
