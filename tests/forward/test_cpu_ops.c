/* test_cpu_ops.c — the scalar math of core/sd_math.h and the kernels/cpu ops
 * against straightforward independent formulas:
 *   - f16 -> f32 for all 65536 bit patterns vs a decode by ldexp;
 *   - f32 -> f16 and f32 -> bf16 (round to nearest even) on ~1M spread float bit
 *     patterns plus edge cases vs rounding done with nearbyint() in double;
 *   - default RoPE inverse frequencies vs theta^(-2i/d); llama3 bands;
 *   - matmul (F32/F16/BF16, bias) vs a double loop, and a row's result independent
 *     of the batch size (bitwise);
 *   - rmsnorm, swiglu, attention (GQA) vs direct double formulas. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_test.h"
#include "sd_math.h"
#include "sd_cpu_attention.h"
#include "sd_cpu_dequant.h"
#include "sd_cpu_matmul.h"
#include "sd_cpu_rmsnorm.h"
#include "sd_cpu_rope.h"
#include "sd_cpu_swiglu.h"
#include "fwd_common.h"

static double ref_f16_decode(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 31) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexp((double)m, -24);
    else v = ldexp(1.0 + m / 1024.0, e - 15);
    return s ? -v : v;
}

/* x rounded to a format with `mbits` mantissa bits, min normal exponent emin and
 * largest finite value maxv, ties to even (nearbyint in the default mode). */
static double ref_round(double x, int mbits, int emin, double maxv) {
    if (x == 0 || isinf(x)) return x;
    double a = fabs(x);
    int e = (int)floor(log2(a));
    if (ldexp(1.0, e) > a) e--; /* guard log2 rounding */
    if (ldexp(1.0, e + 1) <= a) e++;
    if (e < emin) e = emin;
    double q = nearbyint(ldexp(a, mbits - e));
    double r = ldexp(q, e - mbits);
    double ulp_top = ldexp(1.0, (int)floor(log2(maxv)) - mbits);
    if (r > maxv || (r == maxv + ulp_top)) r = INFINITY;
    if (a >= maxv + ulp_top / 2) r = INFINITY;
    return x < 0 ? -r : r;
}

static void test_conversions(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = sd_f16_to_f32((uint16_t)h);
        double want = ref_f16_decode((uint16_t)h);
        int ok = isnan(want) ? isnan(f) : ((double)f == want && !signbit(f) == !signbit(want));
        if (!ok && bad++ < 5) fprintf(stderr, "f16 0x%04x -> %.9g, want %.9g\n", h, (double)f, want);
        if (!isnan(want) && sd_f32_to_f16(f) != h && bad++ < 5) fprintf(stderr, "f16 0x%04x round trip\n", h);
    }
    SD_CHECK(bad == 0, "%d f16 decode / round-trip errors", bad);

    float edges[] = {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, -65520.0f, 1e10f, 5.9604644775390625e-8f,
                     2.98023223876953125e-8f, 2.98023224e-8f, 4.4703484e-8f, 6.1035156e-5f, 6.1e-5f, 1.0f + 1.0f / 2048,
                     1.0f + 3.0f / 2048, FLT_MAX, FLT_MIN, 1e-40f, 3.3895314e38f, 3.3961775e38f, 1.00390625f,
                     1.01171875f, INFINITY, -INFINITY};
    int bad16 = 0, bad_bf = 0;
    uint32_t n = 0;
    for (uint64_t u = 0; u <= 0xffffffffull; u += 4093, n++) {
        float f = n < sizeof edges / sizeof edges[0] ? edges[n] : sd_bits_to_f32((uint32_t)u);
        if (isnan(f)) {
            SD_CHECK(isnan(sd_f16_to_f32(sd_f32_to_f16(f))) && isnan(sd_bf16_to_f32(sd_f32_to_bf16(f))),
                     "NaN 0x%08x not kept", sd_f32_to_bits(f));
            continue;
        }
        double w16 = ref_round((double)f, 10, -14, 65504.0);
        double g16 = sd_f16_to_f32(sd_f32_to_f16(f));
        if (!(g16 == w16 && !signbit(g16) == !signbit(w16)) && bad16++ < 5)
            fprintf(stderr, "f32->f16 %.9g (0x%08x): got %.9g want %.9g\n", (double)f, sd_f32_to_bits(f), g16, w16);
        double wbf = ref_round((double)f, 7, -126, 3.3895313892515355e38);
        double gbf = sd_bf16_to_f32(sd_f32_to_bf16(f));
        if (!(gbf == wbf && !signbit(gbf) == !signbit(wbf)) && bad_bf++ < 5)
            fprintf(stderr, "f32->bf16 %.9g (0x%08x): got %.9g want %.9g\n", (double)f, sd_f32_to_bits(f), gbf, wbf);
    }
    SD_CHECK(bad16 == 0, "%d f32->f16 rounding errors over %u values", bad16, n);
    SD_CHECK(bad_bf == 0, "%d f32->bf16 rounding errors over %u values", bad_bf, n);
}

static void test_rope_freq(void) {
    sd_rope_params rp = {0};
    rp.head_dim = 64;
    rp.theta = 10000.0;
    double inv[32];
    sd_cpu_rope_inv_freq(&rp, inv);
    int bad = 0;
    for (int i = 0; i < 32; i++)
        if (fabs(inv[i] - pow(10000.0, -2.0 * i / 64.0)) > 1e-15 * inv[i]) bad++;
    SD_CHECK(bad == 0, "%d default inverse frequencies wrong", bad);
    rp.llama3 = 1;
    rp.theta = 500000.0;
    rp.factor = 8.0;
    rp.low_freq_factor = 1.0;
    rp.high_freq_factor = 4.0;
    rp.original_max_pos = 8192.0;
    double l3[32];
    sd_cpu_rope_inv_freq(&rp, l3);
    int n_hi = 0, n_lo = 0, n_mid = 0;
    for (int i = 0; i < 32; i++) {
        double base = pow(500000.0, -2.0 * i / 64.0), wl = 2 * SD_PI / base, ratio = l3[i] / base;
        if (wl < 8192.0 / 4.0) n_hi += fabs(ratio - 1.0) < 1e-15;
        else if (wl > 8192.0) n_lo += fabs(ratio - 0.125) < 1e-15;
        else n_mid += ratio > 0.125 && ratio < 1.0;
    }
    /* Llama 3.1 8B (d = 128 there): the three bands all occur for d = 64 too. */
    SD_CHECK(n_hi + n_lo + n_mid == 32 && n_hi > 0 && n_lo > 0 && n_mid > 0, "llama3 bands hi %d lo %d mid %d", n_hi,
             n_lo, n_mid);
    /* rotation: |x| preserved, position 0 is the identity */
    float x[64], y[64], c[32], s[32];
    uint64_t rng = 3;
    for (int i = 0; i < 64; i++) x[i] = y[i] = (float)fwd_rng_normal(&rng);
    sd_cpu_rope_table(l3, 32, 0, c, s);
    sd_cpu_rope(y, 1, 64, c, s);
    SD_CHECK(memcmp(x, y, sizeof x) == 0, "rope at position 0 is not the identity");
    sd_cpu_rope_table(l3, 32, 1000, c, s);
    sd_cpu_rope(y, 1, 64, c, s);
    double nx = 0, ny = 0, dot0 = 0;
    for (int i = 0; i < 64; i++) nx += (double)x[i] * x[i], ny += (double)y[i] * y[i];
    for (int i = 0; i < 32; i++) /* pair 0 rotated by exactly 1000 * inv[0] */
        if (i == 0) dot0 = (double)x[0] * y[0] + (double)x[32] * y[32];
    SD_CHECK(fabs(nx - ny) < 1e-5 * nx, "rope changed the norm: %g vs %g", nx, ny);
    double ang = 1000.0 * l3[0], r0 = (double)x[0] * x[0] + (double)x[32] * x[32];
    SD_CHECK(fabs(dot0 - r0 * cos(ang)) < 1e-5 * r0, "pair 0 not rotated by p * inv_freq[0]");
}

static void test_matmul(sd_dtype dt) {
    enum { IN = 67, OUT = 45, N = 5 };
    uint64_t rng = 17 + (uint64_t)dt;
    sd_tensor w, b;
    fwd_fill(&w, dt, OUT, IN, 0.0, 0.3, &rng);
    fwd_fill(&b, dt, OUT, 0, 0.0, 0.3, &rng);
    float x[N * IN], y[N * OUT], y1[OUT], buf[IN];
    for (int i = 0; i < N * IN; i++) x[i] = (float)fwd_rng_normal(&rng);
    sd_cpu_matmul(x, N, &w, &b, y, buf);
    double worst = 0;
    for (int t = 0; t < N; t++)
        for (int o = 0; o < OUT; o++) {
            double acc = sd_cpu_elem(&b, o);
            for (int i = 0; i < IN; i++) acc += (double)sd_cpu_elem(&w, (int64_t)o * IN + i) * x[t * IN + i];
            worst = fmax(worst, fabs(acc - y[t * OUT + o]) / (fabs(acc) + 1e-3));
        }
    SD_CHECK(worst < 1e-6, "matmul dtype %d: relative error %g", (int)dt, worst);
    for (int t = 0; t < N; t++) {
        sd_cpu_matmul(x + t * IN, 1, &w, &b, y1, buf);
        SD_CHECK(memcmp(y1, y + t * OUT, sizeof y1) == 0, "matmul dtype %d: row %d depends on the batch", (int)dt, t);
    }
    free((void *)w.data);
    free((void *)b.data);
}

static void test_norm_act_attention(void) {
    enum { D = 24, NH = 6, NKV = 2, HD = 8, NK = 9 };
    uint64_t rng = 5;
    sd_tensor w;
    fwd_fill(&w, SD_BF16, D, 0, 1.0, 0.2, &rng);
    float x[2 * D], y[2 * D];
    for (int i = 0; i < 2 * D; i++) x[i] = (float)(3.0 * fwd_rng_normal(&rng));
    sd_cpu_rmsnorm(x, &w, 2, D, 1e-6, y);
    double worst = 0;
    for (int t = 0; t < 2; t++) {
        double ms = 0;
        for (int i = 0; i < D; i++) ms += (double)x[t * D + i] * x[t * D + i] / D;
        for (int i = 0; i < D; i++) {
            double want = x[t * D + i] / sqrt(ms + 1e-6) * sd_cpu_elem(&w, i);
            worst = fmax(worst, fabs(want - y[t * D + i]));
        }
    }
    SD_CHECK(worst < 1e-6, "rmsnorm error %g", worst);
    free((void *)w.data);

    float g[8] = {-30, -2, -0.5f, 0, 0.5f, 2, 30, 1e-3f}, u[8] = {1, 2, 3, 4, 5, 6, 7, 8}, o[8];
    sd_cpu_swiglu(g, u, 8, o);
    worst = 0;
    for (int i = 0; i < 8; i++) worst = fmax(worst, fabs(o[i] - g[i] / (1 + exp(-(double)g[i])) * u[i]));
    SD_CHECK(worst < 1e-5, "swiglu error %g", worst);

    float q[NH * HD], kc[NK * NKV * HD], vc[NK * NKV * HD], out[NH * HD];
    double sc[NK], acc[HD];
    for (int i = 0; i < NH * HD; i++) q[i] = (float)(2.0 * fwd_rng_normal(&rng));
    for (int i = 0; i < NK * NKV * HD; i++) kc[i] = (float)fwd_rng_normal(&rng), vc[i] = (float)fwd_rng_normal(&rng);
    sd_cpu_attention(q, kc, vc, NK, NH, NKV, HD, sc, acc, out);
    worst = 0;
    for (int h = 0; h < NH; h++) {
        int g2 = h / (NH / NKV);
        double p[NK], z = 0;
        for (int j = 0; j < NK; j++) {
            double s = 0;
            for (int c = 0; c < HD; c++) s += (double)q[h * HD + c] * kc[(j * NKV + g2) * HD + c];
            p[j] = exp(s / sqrt((double)HD));
            z += p[j];
        }
        for (int c = 0; c < HD; c++) {
            double v = 0;
            for (int j = 0; j < NK; j++) v += p[j] / z * vc[(j * NKV + g2) * HD + c];
            worst = fmax(worst, fabs(v - out[h * HD + c]));
        }
    }
    SD_CHECK(worst < 1e-6, "attention error %g", worst);
    /* the heads split as the threaded runner splits them (every n-th head from each start, with
     * sinks and a soft-cap): together bitwise the whole call */
    const float sinks[NH] = {0.5f, -1.0f, 2.0f, 0.0f, -3.0f, 1.0f};
    const sd_cpu_attn_opts opt = {0.3, 5.0, sinks};
    float whole[NH * HD], split[NH * HD];
    sd_cpu_attention_keys_opt(q, kc, vc, NULL, NK, NH, NKV, HD, &opt, sc, acc, whole);
    for (int step = 1; step <= NH + 1; step++) {
        memset(split, 0xff, sizeof split);
        for (int h0 = 0; h0 < step; h0++) sd_cpu_attention_heads(q, kc, vc, NULL, NK, NH, NKV, HD, &opt, h0, NH, step, sc,
                                                                 acc, split);
        SD_CHECK(memcmp(whole, split, sizeof whole) == 0, "heads every %d: not bitwise the whole call", step);
    }
}

int main(void) {
    test_conversions();
    test_rope_freq();
    test_matmul(SD_F32);
    test_matmul(SD_F16);
    test_matmul(SD_BF16);
    test_norm_act_attention();
    return sd_test_done();
}
