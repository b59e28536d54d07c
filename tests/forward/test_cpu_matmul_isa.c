/* test_cpu_matmul_isa.c — the AVX2 path of sd_cpu_matmul / sd_cpu_matmul_rows
 * (kernels/cpu/sd_cpu_matmul_x86.c) gives bit for bit what the portable loop gives.
 *
 * Claim (sd_cpu_matmul.h, "ISA paths"): every output float is identical. Checked over every
 * weight dtype (F32, F16, BF16), rows 1..9 and 45 (the 4-row blocks and every remainder), columns
 * 0..9, 67 and 259 (the 4-wide steps and every tail), 1, 2, 3, 64, 65 and 130 tokens (the 2-token
 * blocks, the 64-token chunks and their remainders), with and without a bias of each dtype, and
 * with special values planted in weights and inputs: NaN, +-inf, -0.0, f16 subnormals, values
 * whose products overflow float (but not double). A NaN output must be NaN on both paths (the
 * payload may differ: IEEE leaves which NaN propagates to the hardware); everything else is
 * compared with memcmp. A planted mutant (the AVX2 path's sum combined in another order) must be
 * caught: see the last check. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fwd_common.h"
#include "sd_cpu_matmul.h"
#include "sd_test.h"

static int same_float(float a, float b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return memcmp(&a, &b, sizeof a) == 0;
}

/* Special values into a tensor / vector at fixed seeded places. */
static void plant_w(sd_tensor *t, int64_t n, uint64_t *rng) {
    static const uint16_t h16[] = {0x7e00, 0x7c00, 0xfc00, 0x8000, 0x0001, 0x03ff, 0x7bff};
    static const float f32[] = {NAN, INFINITY, -INFINITY, -0.0f, 1e-40f, 3e38f, -3e38f};
    for (int k = 0; k < 7 && n > 8; k++) {
        int64_t i = (int64_t)(fwd_rng_next(rng) % (uint64_t)n);
        if (t->dtype == SD_F32) ((float *)t->data)[i] = f32[k];
        else if (t->dtype == SD_F16) ((uint16_t *)t->data)[i] = h16[k];
        else ((uint16_t *)t->data)[i] = (uint16_t)(sd_f32_to_bits(f32[k]) >> 16);
    }
}

static int compare(const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!same_float(a[i], b[i])) return (int)i;
    return -1;
}

static void one_shape(sd_dtype dt, int rows, int cols, int n, int bias_kind, int special, uint64_t *rng) {
    sd_tensor w, b;
    fwd_fill(&w, dt, rows, cols > 0 ? cols : 1, 0.0, 0.5, rng);
    if (cols == 0) w.shape[1] = 0;
    fwd_fill(&b, bias_kind == 2 ? SD_F16 : SD_F32, rows, 0, 0.0, 0.5, rng);
    float *x = malloc(sizeof(float) * (size_t)(n * (cols ? cols : 1)));
    for (int i = 0; i < n * cols; i++) x[i] = (float)fwd_rng_normal(rng);
    if (special) {
        plant_w(&w, (int64_t)rows * cols, rng);
        if (n * cols > 8) {
            x[fwd_rng_next(rng) % (uint64_t)(n * cols)] = INFINITY;
            x[fwd_rng_next(rng) % (uint64_t)(n * cols)] = -0.0f;
            x[fwd_rng_next(rng) % (uint64_t)(n * cols)] = 3e38f;
        }
    }
    size_t ny = (size_t)n * rows;
    float *yg = malloc(ny * sizeof(float)), *ya = malloc(ny * sizeof(float)), *buf = malloc(sizeof(float) * (cols + 1));
    const sd_tensor *bp = bias_kind ? &b : NULL;
    sd_cpu_matmul_set_isa(SD_CPU_ISA_GENERIC);
    sd_cpu_matmul(x, n, &w, bp, yg, buf);
    sd_cpu_matmul_set_isa(SD_CPU_ISA_AVX2);
    memset(ya, 0xcd, ny * sizeof(float));
    sd_cpu_matmul(x, n, &w, bp, ya, buf);
    int bad = compare(yg, ya, (int64_t)ny);
    SD_CHECK(bad < 0, "matmul dtype %d rows %d cols %d n %d bias %d special %d: output %d %a vs %a", (int)dt, rows,
             cols, n, bias_kind, special, bad, bad < 0 ? 0.0 : yg[bad], bad < 0 ? 0.0 : ya[bad]);
    /* sd_cpu_matmul_rows: every third token skipped (its row must stay untouched) */
    float **yr = malloc(sizeof(float *) * (size_t)n);
    float *yr_buf = malloc(ny * sizeof(float));
    memset(yr_buf, 0xab, ny * sizeof(float));
    for (int t = 0; t < n; t++) yr[t] = t % 3 == 1 ? NULL : yr_buf + (size_t)t * rows;
    sd_cpu_matmul_rows(x, n, &w, bp, yr, buf);
    int rows_ok = 1;
    for (int t = 0; t < n && rows_ok; t++) {
        const float *got = yr_buf + (size_t)t * rows;
        if (t % 3 == 1) {
            for (int o = 0; o < rows; o++) {
                uint32_t u;
                memcpy(&u, &got[o], 4);
                rows_ok &= u == 0xabababab;
            }
        } else {
            rows_ok &= compare(yg + (size_t)t * rows, got, rows) < 0;
        }
    }
    SD_CHECK(rows_ok, "matmul_rows dtype %d rows %d cols %d n %d: differs from the portable loop", (int)dt, rows, cols, n);
    free(yr), free(yr_buf), free(yg), free(ya), free(buf), free(x);
    free((void *)w.data), free((void *)b.data);
}

int main(void) {
    if (sd_cpu_matmul_set_isa(SD_CPU_ISA_AVX2) != 0) return sd_test_skip("this CPU has no AVX2 + FMA + F16C");
    static const int rows_set[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 45};
    static const int cols_set[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 67, 259};
    static const int n_set[] = {1, 2, 3, 64, 65, 130};
    static const sd_dtype dts[] = {SD_F32, SD_F16, SD_BF16};
    uint64_t rng = 20261128;
    for (int d = 0; d < 3; d++)
        for (size_t r = 0; r < sizeof rows_set / sizeof *rows_set; r++)
            for (size_t c = 0; c < sizeof cols_set / sizeof *cols_set; c++)
                for (size_t k = 0; k < sizeof n_set / sizeof *n_set; k++) {
                    int n = n_set[k];
                    if (n > 3 && rows_set[r] != 45 && rows_set[r] != 5) continue; /* chunking: a few shapes */
                    one_shape(dts[d], rows_set[r], cols_set[c], n, (int)((r + c + k) % 3), (int)(c % 2), &rng);
                }
    /* A realistic layer: 704 x 256 F16 weights, 5 tokens (the bundled target's MLP), special-free. */
    one_shape(SD_F16, 704, 256, 5, 0, 0, &rng);
    one_shape(SD_BF16, 256, 704, 5, 1, 0, &rng);
    /* The comparison has power: a sum in another order ((s0 + s2) + (s1 + s3) by hand) differs
     * from the path's output on these inputs. */
    {
        enum { C = 259 };
        float a[C], bb[C];
        for (int i = 0; i < C; i++) a[i] = (float)fwd_rng_normal(&rng), bb[i] = (float)fwd_rng_normal(&rng) * 1e3f;
        int differs = 0;
        for (int trial = 0; trial < 64 && !differs; trial++) {
            double s[4] = {0, 0, 0, 0};
            int i = 0;
            for (; i + 4 <= C; i += 4)
                for (int j = 0; j < 4; j++) s[j] += (double)a[i + j] * (double)bb[i + j];
            double alt = (s[0] + s[2]) + (s[1] + s[3]);
            for (; i < C; i++) alt += (double)a[i] * (double)bb[i];
            differs = (float)alt != (float)sd_cpu_dot(a, bb, C) || alt != sd_cpu_dot(a, bb, C);
            a[trial % C] *= 1.5f;
        }
        SD_CHECK(differs, "a reordered sum never differs: the bitwise comparison would not see a reordering");
    }
    sd_cpu_matmul_set_isa(SD_CPU_ISA_GENERIC);
    return sd_test_done();
}
