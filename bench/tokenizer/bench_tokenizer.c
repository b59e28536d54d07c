/* bench_tokenizer.c — encode throughput of specdec's tokenizer, single thread.
 * usage: bench_tokenizer TOKENIZER DOCS_FILE [REPEATS]
 * DOCS_FILE (written by bench_tokenizer.py): "SDBN1\n", u32 n, then per document
 * u32 len + bytes, u32 n_ids + i32 ids (the `tokenizers` library's ids). The ids are
 * checked first (a benchmark of wrong output is meaningless); then one warm-up pass and
 * REPEATS timed passes over all documents; prints one JSON object with the median. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "specdec.h"

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: bench_tokenizer TOKENIZER DOCS_FILE [REPEATS]\n"); return 2; }
    int repeats = argc > 3 ? atoi(argv[3]) : 5;
    if (repeats < 1 || repeats > 100) repeats = 5;
    FILE *f = fopen(argv[2], "rb");
    if (!f) { fprintf(stderr, "cannot open %s\n", argv[2]); return 2; }
    fseek(f, 0, SEEK_END);
    long fl = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *d = malloc((size_t)fl);
    if (!d || fread(d, 1, (size_t)fl, f) != (size_t)fl || fl < 10 || memcmp(d, "SDBN1\n", 6)) {
        fprintf(stderr, "bad docs file\n");
        return 2;
    }
    fclose(f);
    uint32_t n;
    memcpy(&n, d + 6, 4);
    const char **text = calloc(n, sizeof *text);
    uint32_t *tl = calloc(n, sizeof *tl), *il = calloc(n, sizeof *il);
    const unsigned char **ids = calloc(n, sizeof *ids);
    size_t off = 10, bytes = 0, max_ids = 0;
    for (uint32_t i = 0; i < n; i++) {
        memcpy(&tl[i], d + off, 4); off += 4;
        text[i] = (const char *)d + off; off += tl[i];
        memcpy(&il[i], d + off, 4); off += 4;
        ids[i] = d + off; off += (size_t)il[i] * 4;
        if (off > (size_t)fl) { fprintf(stderr, "truncated docs file\n"); return 2; }
        bytes += tl[i];
        if (il[i] > max_ids) max_ids = il[i];
    }
    specdec_tokenizer *tok = NULL;
    double t0 = bench_now_s();
    if (specdec_tokenizer_load(argv[1], &tok)) { fprintf(stderr, "load: %s\n", specdec_last_error()); return 1; }
    double load_s = bench_now_s() - t0;
    size_t cap = max_ids + 16;
    int32_t *out = malloc(cap * sizeof *out);
    /* validate */
    for (uint32_t i = 0; i < n; i++) {
        int32_t k = 0;
        if (specdec_tokenize(tok, text[i], tl[i], 0, out, (int32_t)cap, &k) || (uint32_t)k != il[i] ||
            memcmp(out, ids[i], (size_t)k * 4)) {
            fprintf(stderr, "document %u: ids differ from the tokenizers library; not timing\n", i);
            return 1;
        }
    }
    double *ts = malloc(sizeof(double) * (size_t)repeats);
    size_t total_ids = 0;
    for (int r = -1; r < repeats; r++) {
        double a = bench_now_s();
        for (uint32_t i = 0; i < n; i++) {
            int32_t k = 0;
            specdec_tokenize(tok, text[i], tl[i], 0, out, (int32_t)cap, &k);
            if (r == 0) total_ids += (size_t)k;
        }
        double b = bench_now_s();
        if (r >= 0) ts[r] = b - a;
    }
    bench_sort(ts, repeats);
    double med = ts[repeats / 2];
    printf("{\"bytes\": %zu, \"docs\": %u, \"ids\": %zu, \"median_s\": %.6f, \"min_s\": %.6f, \"mb_per_s\": %.3f, "
           "\"load_s\": %.4f, \"repeats\": %d}\n",
           bytes, n, total_ids, med, ts[0], (double)bytes / med / 1e6, load_s, repeats);
    specdec_tokenizer_free(tok);
    free(out); free(ts); free(text); free(tl); free(il); free(ids); free(d);
    return 0;
}
