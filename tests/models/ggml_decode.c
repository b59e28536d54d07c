/* ggml_decode.c — the values specdec reads from ggml blocks, for tests/models/ggml_iq_check.py:
 *
 *     ggml_decode TYPE ROWS COLS BLOCKS.bin OUT.f32
 *
 * repacks ROWS x COLS values of ggml type TYPE (its name, e.g. IQ2_XXS) from BLOCKS.bin with sd_ggml_repack
 * (models/sd_ggml.h) and writes them as read back through sd_cpu_row_f32, little-endian float32 row-major;
 * exits 1 when the repack refuses the blocks (the reason on stderr) or when sd_cpu_elem disagrees with
 * sd_cpu_row_f32 on any value, 2 on bad arguments. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_cpu_dequant.h"
#include "sd_ggml.h"
#include "sd_gguf.h"

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s TYPE ROWS COLS BLOCKS.bin OUT.f32\n", argv[0]);
        return 2;
    }
    uint32_t type = 0;
    sd_ggml_type_info ti = {0};
    for (uint32_t t = 0; t < 64 && !ti.name; t++) {
        const sd_ggml_type_info x = sd_ggml_type_info_of(t);
        if (x.name && !strcmp(x.name, argv[1])) type = t, ti = x;
    }
    const long rows = atol(argv[2]), cols = atol(argv[3]);
    if (!ti.name || !sd_ggml_repackable(type) || rows < 1 || cols < 1 || cols % (long)ti.block) {
        fprintf(stderr, "%s: not a repackable type, or a bad shape\n", argv[1]);
        return 2;
    }
    const size_t in_bytes = (size_t)rows * (size_t)(cols / (long)ti.block) * ti.bytes;
    uint8_t *src = malloc(in_bytes);
    void *buf = calloc(1, sd_ggml_bytes(type, rows, cols));
    float *row = malloc((size_t)cols * sizeof *row);
    FILE *f = fopen(argv[4], "rb");
    if (!src || !buf || !row || !f || fread(src, 1, in_bytes, f) != in_bytes) {
        fprintf(stderr, "%s: cannot read %zu bytes\n", argv[4], in_bytes);
        return 2;
    }
    fclose(f);
    sd_tensor w;
    char why[160] = "";
    if (!sd_ggml_repack(type, src, rows, cols, 0, buf, &w, why, sizeof why)) {
        fprintf(stderr, "repack refused: %s\n", why);
        return 1;
    }
    FILE *o = fopen(argv[5], "wb");
    if (!o) return 2;
    long bad = 0;
    for (long r = 0; r < rows; r++) {
        const float *p = sd_cpu_row_f32(&w, r, row);
        for (long c = 0; c < cols; c++) {
            const float e = sd_cpu_elem(&w, (int64_t)r * cols + c);
            bad += memcmp(&e, &p[c], 4) != 0;
        }
        fwrite(p, sizeof *p, (size_t)cols, o);
    }
    fclose(o);
    free(src), free(buf), free(row);
    if (bad) fprintf(stderr, "%ld values differ between sd_cpu_elem and sd_cpu_row_f32\n", bad);
    return bad ? 1 : 0;
}
