/* test_cublas_load.c — cuBLAS is loaded by the library when first needed, not linked
 * (kernels/cuda/sd_cublas_dl.h): before the first call no libcublas is mapped into the process
 * (linked, libcublasLt's ~540 MB cost every process that loaded libspecdec ~0.2 s at start-up);
 * the first call maps it and resolves every function the backend uses, which answer through it.
 * Needs no GPU: runs in every CUDA-enabled build. */
#include <stdio.h>
#include <string.h>

#include "sd_test.h"

int sd_cublas_loaded(void);
const char *sd_cublas_status_name_of(int s);

/* 1 when a library whose path contains name is mapped into this process. */
static int mapped(const char *name) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return -1;
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) found = strstr(line, name) != NULL;
    fclose(f);
    return found;
}

int main(void) {
    const int before = mapped("libcublas");
    SD_CHECK(before == 0, "libcublas mapped before any CUDA use (%d): the library links it again", before);
    SD_CHECK(sd_cublas_loaded() == 1, "cuBLAS could not be loaded");
    SD_CHECK(mapped("libcublas") == 1, "libcublas not mapped after loading it");
    SD_CHECK(strcmp(sd_cublas_status_name_of(0), "CUBLAS_STATUS_SUCCESS") == 0 &&
                 strcmp(sd_cublas_status_name_of(3), "CUBLAS_STATUS_ALLOC_FAILED") == 0,
             "status names through the loaded library: '%s', '%s'", sd_cublas_status_name_of(0),
             sd_cublas_status_name_of(3));
    SD_CHECK(sd_cublas_loaded() == 1, "a second call");
    return sd_test_done();
}
