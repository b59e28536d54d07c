/* seed_runner.c — regression test over a fuzz target's seeds and committed corpus (used
 * when the build is not a libFuzzer build): runs the target's sd_fuzz_init() when it
 * has one (exit 77 = skipped when it says what it needs is absent), then feeds every
 * file of each directory given on the command line to sd_fuzz_one(). Any crash,
 * sanitizer report or violated invariant fails the test; in addition files named ok_*
 * must be accepted (status 0) and bad_* refused. A directory that does not exist is
 * skipped with a note (a target's corpus may be empty); the first must have files. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "sd_test.h"

/* Defined by targets that need set-up; NULL otherwise. */
__attribute__((weak)) int sd_fuzz_init(void);

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void run_file(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    SD_CHECK(f != NULL, "cannot open %s", path);
    if (!f) return;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    /* an exact-size heap copy so ASan sees any read past the end */
    uint8_t *buf = malloc(sz > 0 ? (size_t)sz : 1);
    size_t got = fread(buf, 1, (size_t)sz, f);
    fclose(f);
    SD_CHECK(got == (size_t)sz, "short read of %s", path);
    int st = sd_fuzz_one(sz > 0 ? buf : NULL, got);
    if (!strncmp(name, "ok_", 3)) SD_CHECK(st == 0, "%s: refused (status %d)", name, st);
    else if (!strncmp(name, "bad_", 4)) SD_CHECK(st != 0, "%s: accepted", name);
    else SD_CHECK(1, "%s", name);
    printf("%-50s status %d\n", name, st);
    free(buf);
}

/* Runs every file of dir; returns how many there were (-1: no such directory). */
static int run_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    size_t cap = 1024, n = 0;
    char **names = malloc(cap * sizeof *names);
    struct dirent *e;
    while (names && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            char **p = realloc(names, 2 * cap * sizeof *names);
            if (!p) break;
            names = p;
            cap *= 2;
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    SD_CHECK(names != NULL, "out of memory listing %s", dir);
    if (!names) return 0;
    qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n; i++) {
        run_file(dir, names[i]);
        free(names[i]);
    }
    free(names);
    return (int)n;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s SEED_DIR [CORPUS_DIR ...]\n", argv[0]);
        return 2;
    }
    if (sd_fuzz_init) {
        int r = sd_fuzz_init();
        if (r == SD_FUZZ_SKIP) return sd_test_skip("the fuzz target's inputs (e.g. ../shared) are absent");
        SD_CHECK(r == 0, "fuzz target set-up failed (%d)", r);
        if (r) return sd_test_done();
    }
    for (int a = 1; a < argc; a++) {
        int n = run_dir(argv[a]);
        if (a == 1) SD_CHECK(n > 0, "no seeds in %s", argv[a]);
        else if (n < 0) printf("(no corpus directory %s)\n", argv[a]);
        printf("%s: %d inputs\n", argv[a], n < 0 ? 0 : n);
    }
    return sd_test_done();
}
