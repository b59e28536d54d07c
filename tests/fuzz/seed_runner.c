/* seed_runner.c — regression test over a fuzz target's seed corpus (used when the
 * build is not a libFuzzer build): feeds every file of the directory given on the
 * command line to sd_fuzz_one(). Any crash or sanitizer report fails the test; in
 * addition files named ok_* must be accepted (status 0) and bad_* refused. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "sd_test.h"

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SEED_DIR\n", argv[0]);
        return 2;
    }
    DIR *d = opendir(argv[1]);
    SD_CHECK(d != NULL, "cannot open seed directory %s", argv[1]);
    if (!d) return sd_test_done();
    char *names[1024];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 1024)
        if (e->d_name[0] != '.') names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    SD_CHECK(n > 0, "no seeds in %s", argv[1]);
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[1], names[i]);
        FILE *f = fopen(path, "rb");
        SD_CHECK(f != NULL, "cannot open %s", path);
        if (!f) continue;
        fseek(f, 0, SEEK_END);
        long sz = ftell(f);
        fseek(f, 0, SEEK_SET);
        /* an exact-size heap copy so ASan sees any read past the end */
        uint8_t *buf = malloc(sz > 0 ? (size_t)sz : 1);
        size_t got = fread(buf, 1, (size_t)sz, f);
        fclose(f);
        SD_CHECK(got == (size_t)sz, "short read of %s", path);
        int st = sd_fuzz_one(sz > 0 ? buf : NULL, got);
        if (!strncmp(names[i], "ok_", 3)) SD_CHECK(st == 0, "%s: refused (status %d)", names[i], st);
        else if (!strncmp(names[i], "bad_", 4)) SD_CHECK(st != 0, "%s: accepted", names[i]);
        else SD_CHECK(1, "%s", names[i]);
        printf("%-50s status %d\n", names[i], st);
        free(buf);
        free(names[i]);
    }
    return sd_test_done();
}
