/* test_cuda_model_ops.c — the CUDA ops the model families added, against their CPU
 * references (kernels/cpu), with the tolerance comparison of tests/cuda (first
 * mismatches and the max error printed; outputs poisoned with NaN first):
 *   - attention with a sliding window, a query_pre_attn_scalar scale and score
 *     soft-capping vs sd_cpu_attention_keys_opt over the window's keys, for windows
 *     inside one tile, across tiles and across splits (positions up to 700); batch
 *     invariance: each token alone == its row in the batch, bitwise;
 *   - partial rotary RoPE + KV append (rot_dim < hd: the pass-through dims of k reach
 *     the cache unchanged) vs sd_cpu_rope_part;
 *   - per-head q/k RMSNorm vs sd_cpu_rmsnorm_off per head;
 *   - the gated MLP with SiLU / GELU-tanh / GELU vs sd_cpu_glu; soft-capping and scaling.
 * Skips without a device. */
#include "sd_test.h"
#include "specdec.h"

#ifndef SPECDEC_WITH_CUDA
int main(void) { return sd_test_skip("no CUDA device"); }
#else

#include "cuda_test_util.h"
#include "sd_cpu_attention.h"
#include "sd_cpu_rmsnorm.h"
#include "sd_cpu_rope.h"
#include "sd_cpu_swiglu.h"
#include "sd_cuda_ops.h"

/* One case of windowed attention over a contiguous cache (CHAIN mode, identity table). */
static void attention_case(ct_rng *rng, int nh, int nkv, int hd, int n, int pos0, int window, float scale, float cap) {
    const int n_ctx = pos0 + n, kv_len = pos0 + n;
    const size_t ce = (size_t)nkv * n_ctx * hd;
    float *kv = malloc(ce * 4), *vv = malloc(ce * 4);
    for (size_t i = 0; i < ce; i++) {
        kv[i] = ct_unif(rng, 2.0f);
        vv[i] = ct_unif(rng, 1.0f);
    }
    float *kc = malloc(sizeof(float) * kv_len * nkv * hd), *vc = malloc(sizeof(float) * kv_len * nkv * hd);
    for (int j = 0; j < kv_len; j++) /* CPU layout [n_ctx][nkv][hd] */
        for (int g = 0; g < nkv; g++)
            for (int d = 0; d < hd; d++) {
                kc[((size_t)j * nkv + g) * hd + d] = kv[((size_t)g * n_ctx + j) * hd + d];
                vc[((size_t)j * nkv + g) * hd + d] = vv[((size_t)g * n_ctx + j) * hd + d];
            }
    const size_t od = (size_t)nh * hd;
    float *q = malloc(sizeof(float) * n * od), *ref = malloc(sizeof(float) * n * od);
    float *got = malloc(sizeof(float) * n * od), *one = malloc(sizeof(float) * od);
    for (size_t i = 0; i < n * od; i++) q[i] = ct_unif(rng, 3.0f);
    double *scores = malloc(sizeof(double) * kv_len), *acc = malloc(sizeof(double) * hd);
    int64_t *keys = malloc(sizeof(int64_t) * kv_len);
    const sd_cpu_attn_opts opt = {scale, cap, NULL};
    for (int m = 0; m < n; m++) {
        const int p = pos0 + m, first = window > 0 && p + 1 > window ? p + 1 - window : 0;
        for (int j = first; j <= p; j++) keys[j - first] = j;
        sd_cpu_attention_keys_opt(q + (size_t)m * od, kc, vc, keys, p + 1 - first, nh, nkv, hd, &opt, scores, acc,
                                  ref + (size_t)m * od);
    }
    void *d_k = ct_dev_upload(kv, ce * 4), *d_v = ct_dev_upload(vv, ce * 4);
    float *d_q = ct_dev_upload(q, sizeof(float) * n * od), *d_o = ct_dev_alloc(sizeof(float) * n * od);
    const size_t part_floats = sd_cuda_attention_part_floats(n, nh, hd, n_ctx);
    float *d_part = ct_dev_alloc(sizeof(float) * part_floats);
    sd_errbuf eb;
    sd_cuda_attention_args aa = {.q = d_q, .ldq = (int32_t)od, .k_cache = d_k, .v_cache = d_v, .kv_dt = SD_F32,
                                 .cache_rows = n_ctx, .n_ctx = n_ctx, .n = n, .map = {.pos0 = pos0, .block_tokens = 1},
                                 .n_heads = nh, .n_kv = nkv, .hd = hd, .part = d_part, .part_floats = part_floats,
                                 .out = d_o, .ldo = (int32_t)od,
                                 .scale = scale, .softcap = cap, .window = window};
    SD_CHECK(sd_cuda_attention(&aa, 0, &eb) == SPECDEC_OK, "%s", eb.msg);
    CT_CUDA(cudaMemcpy(got, d_o, sizeof(float) * n * od, cudaMemcpyDeviceToHost));
    char what[128];
    snprintf(what, sizeof what, "attention window=%d scale=%g cap=%g hd=%d n=%d pos0=%d", window, scale, cap, hd, n,
             pos0);
    SD_CHECK(ct_compare(what, got, ref, (size_t)n * od, 1e-5, 1e-4, 1e-5), "%s", what);
    int same = 1;
    for (int m = 0; m < n; m++) { /* batch invariance */
        ct_poison(d_o, sizeof(float) * od);
        aa.q = d_q + (size_t)m * od;
        aa.n = 1;
        aa.map.pos0 = pos0 + m;
        SD_CHECK(sd_cuda_attention(&aa, 0, &eb) == SPECDEC_OK, "%s", eb.msg);
        CT_CUDA(cudaMemcpy(one, d_o, sizeof(float) * od, cudaMemcpyDeviceToHost));
        same &= memcmp(one, got + (size_t)m * od, sizeof(float) * od) == 0;
    }
    SD_CHECK(same, "%s: a token alone differs from its row in the batch", what);
    cudaFree(d_k); cudaFree(d_v); cudaFree(d_q); cudaFree(d_o); cudaFree(d_part);
    free(kv); free(vv); free(kc); free(vc); free(q); free(ref); free(got); free(one); free(scores); free(acc);
    free(keys);
}

static void test_attention(ct_rng *rng) {
    attention_case(rng, 4, 2, 16, 9, 20, 5, 0.0f, 0.0f);       /* window inside a tile */
    attention_case(rng, 4, 2, 64, 6, 90, 40, 0.0f, 0.0f);      /* across tiles */
    attention_case(rng, 8, 2, 128, 5, 690, 300, 0.0f, 0.0f);   /* across splits */
    attention_case(rng, 4, 4, 32, 17, 250, 129, 0.0f, 0.0f);   /* the window starts mid-split */
    attention_case(rng, 4, 2, 32, 4, 30, 0, 1.0f / 24.0f, 2.0f); /* scale and soft-cap, no window */
    attention_case(rng, 2, 1, 256, 3, 140, 8, 0.2f, 5.0f);     /* everything at head_dim 256 */
}

static void test_rope_partial(ct_rng *rng) {
    const int nh = 2, nkv = 1, hd = 16, rot = 12, n = 5, pos0 = 7, n_ctx = 16, half = rot / 2;
    const int ld = (nh + 2 * nkv) * hd;
    float *qkv = malloc(sizeof(float) * n * ld), *ref = malloc(sizeof(float) * n * ld);
    float *cs = malloc(sizeof(float) * n_ctx * half), *sn = malloc(sizeof(float) * n_ctx * half);
    double inv[8];
    sd_rope_params rp = {.head_dim = rot, .theta = 100.0};
    sd_cpu_rope_inv_freq(&rp, inv);
    for (int p = 0; p < n_ctx; p++) sd_cpu_rope_table(inv, half, p, cs + p * half, sn + p * half);
    for (int i = 0; i < n * ld; i++) qkv[i] = ct_unif(rng, 2.0f);
    memcpy(ref, qkv, sizeof(float) * n * ld);
    for (int m = 0; m < n; m++) {
        const float *c = cs + (pos0 + m) * half, *s = sn + (pos0 + m) * half;
        sd_cpu_rope_part(ref + (size_t)m * ld, nh, hd, rot, c, s);
        sd_cpu_rope_part(ref + (size_t)m * ld + nh * hd, nkv, hd, rot, c, s);
    }
    float *d_qkv = ct_dev_upload(qkv, sizeof(float) * n * ld);
    float *d_cs = ct_dev_upload(cs, sizeof(float) * n_ctx * half), *d_sn = ct_dev_upload(sn, sizeof(float) * n_ctx * half);
    float *d_k = ct_dev_alloc(sizeof(float) * n_ctx * nkv * hd), *d_v = ct_dev_alloc(sizeof(float) * n_ctx * nkv * hd);
    sd_errbuf eb;
    sd_cuda_rope_args ra = {.qkv = d_qkv, .ldqkv = ld, .n = n, .map = {.pos0 = pos0, .block_tokens = 1}, .n_heads = nh,
                            .n_kv = nkv, .hd = hd, .cos_t = d_cs, .sin_t = d_sn, .k_cache = d_k, .v_cache = d_v,
                            .kv_dt = SD_F32, .n_ctx = n_ctx, .cache_rows = n_ctx, .rot_dim = rot};
    SD_CHECK(sd_cuda_rope_kv(&ra, 0, &eb) == SPECDEC_OK, "%s", eb.msg);
    float *got = malloc(sizeof(float) * n * ld), *kc = malloc(sizeof(float) * n_ctx * nkv * hd);
    CT_CUDA(cudaMemcpy(got, d_qkv, sizeof(float) * n * ld, cudaMemcpyDeviceToHost));
    CT_CUDA(cudaMemcpy(kc, d_k, sizeof(float) * n_ctx * nkv * hd, cudaMemcpyDeviceToHost));
    float *qg = malloc(sizeof(float) * n * nh * hd), *qr = malloc(sizeof(float) * n * nh * hd);
    float *kg = malloc(sizeof(float) * n * hd), *kr = malloc(sizeof(float) * n * hd);
    for (int m = 0; m < n; m++) {
        memcpy(qg + m * nh * hd, got + (size_t)m * ld, sizeof(float) * nh * hd);
        memcpy(qr + m * nh * hd, ref + (size_t)m * ld, sizeof(float) * nh * hd);
        memcpy(kg + m * hd, kc + (size_t)(pos0 + m) * hd, sizeof(float) * hd); /* nkv = 1: row = position */
        memcpy(kr + m * hd, ref + (size_t)m * ld + nh * hd, sizeof(float) * hd);
    }
    SD_CHECK(ct_compare("rope partial rot 12 of 16: q", qg, qr, (size_t)n * nh * hd, 0, 0, 0), "rope q");
    SD_CHECK(ct_compare("rope partial rot 12 of 16: k in the cache", kg, kr, (size_t)n * hd, 0, 0, 0), "rope k");
    cudaFree(d_qkv); cudaFree(d_cs); cudaFree(d_sn); cudaFree(d_k); cudaFree(d_v);
    free(qkv); free(ref); free(cs); free(sn); free(got); free(kc); free(qg); free(qr); free(kg); free(kr);
}

static void test_head_norm(ct_rng *rng) {
    const int n = 7, nh = 4, nkv = 2, hd = 48, ld = (nh + 2 * nkv) * hd + 3;
    float *qkv = malloc(sizeof(float) * n * ld), *ref = malloc(sizeof(float) * n * ld), *got = malloc(sizeof(float) * n * ld);
    float wq[48], wk[48];
    for (int i = 0; i < hd; i++) {
        wq[i] = 1.0f + ct_unif(rng, 0.3f);
        wk[i] = 1.0f + ct_unif(rng, 0.3f);
    }
    for (int i = 0; i < n * ld; i++) qkv[i] = ct_unif(rng, 3.0f);
    memcpy(ref, qkv, sizeof(float) * n * ld);
    const sd_tensor tq = {wq, SD_F32, 1, {hd, 1}, NULL}, tk = {wk, SD_F32, 1, {hd, 1}, NULL};
    for (int m = 0; m < n; m++) {
        sd_cpu_rmsnorm_off(ref + (size_t)m * ld, &tq, 0.0, nh, hd, 1e-6, ref + (size_t)m * ld);
        sd_cpu_rmsnorm_off(ref + (size_t)m * ld + nh * hd, &tk, 0.0, nkv, hd, 1e-6, ref + (size_t)m * ld + nh * hd);
    }
    float *d_qkv = ct_dev_upload(qkv, sizeof(float) * n * ld);
    float *d_wq = ct_dev_upload(wq, sizeof wq), *d_wk = ct_dev_upload(wk, sizeof wk);
    sd_errbuf eb;
    sd_cuda_head_norm_args na = {d_qkv, ld, n, nh, nkv, hd, d_wq, d_wk, 1e-6f};
    SD_CHECK(sd_cuda_head_rmsnorm(&na, 0, &eb) == SPECDEC_OK, "%s", eb.msg);
    CT_CUDA(cudaMemcpy(got, d_qkv, sizeof(float) * n * ld, cudaMemcpyDeviceToHost));
    SD_CHECK(ct_compare("per-head q/k RMSNorm (v untouched)", got, ref, (size_t)n * ld, 1e-6, 1e-5, 1e-6), "head norm");
    cudaFree(d_qkv); cudaFree(d_wq); cudaFree(d_wk);
    free(qkv); free(ref); free(got);
}

static void test_elementwise(ct_rng *rng) {
    const int n = 5, inter = 300, cols = 333;
    float *gu = malloc(sizeof(float) * n * 2 * inter), *ref = malloc(sizeof(float) * n * inter);
    float *got = malloc(sizeof(float) * n * inter), *g = malloc(sizeof(float) * n * inter), *u = malloc(sizeof(float) * n * inter);
    for (int i = 0; i < n * 2 * inter; i++) gu[i] = ct_unif(rng, 6.0f);
    for (int m = 0; m < n; m++)
        for (int j = 0; j < inter; j++) {
            g[m * inter + j] = gu[(size_t)m * 2 * inter + j];
            u[m * inter + j] = gu[(size_t)m * 2 * inter + inter + j];
        }
    float *d_gu = ct_dev_upload(gu, sizeof(float) * n * 2 * inter), *d_h = ct_dev_alloc(sizeof(float) * n * inter);
    sd_errbuf eb;
    const char *names[3] = {"glu SiLU", "glu GELU-tanh (GeGLU)", "glu GELU-erf"};
    for (int act = 0; act < 3; act++) {
        ct_poison(d_h, sizeof(float) * n * inter);
        sd_cpu_glu(act, g, u, (int64_t)n * inter, ref);
        SD_CHECK(sd_cuda_glu(d_gu, d_h, n, inter, act, 0, &eb) == SPECDEC_OK, "%s", eb.msg);
        CT_CUDA(cudaMemcpy(got, d_h, sizeof(float) * n * inter, cudaMemcpyDeviceToHost));
        SD_CHECK(ct_compare(names[act], got, ref, (size_t)n * inter, 1e-6, 1e-5, 1e-6), "%s", names[act]);
    }
    float *x = malloc(sizeof(float) * n * (cols + 5)), *xr = malloc(sizeof(float) * n * (cols + 5));
    for (int i = 0; i < n * (cols + 5); i++) x[i] = ct_unif(rng, 60.0f);
    memcpy(xr, x, sizeof(float) * n * (cols + 5));
    for (int m = 0; m < n; m++) sd_cpu_softcap(xr + (size_t)m * (cols + 5), cols, 15.0);
    float *d_x = ct_dev_upload(x, sizeof(float) * n * (cols + 5));
    SD_CHECK(sd_cuda_softcap(d_x, n, (size_t)cols + 5, cols, 15.0f, 0, &eb) == SPECDEC_OK, "%s", eb.msg);
    CT_CUDA(cudaMemcpy(x, d_x, sizeof(float) * n * (cols + 5), cudaMemcpyDeviceToHost));
    SD_CHECK(ct_compare("soft-cap 15 (row padding untouched)", x, xr, (size_t)n * (cols + 5), 1e-6, 1e-6, 1e-6), "softcap");
    sd_cpu_scale(xr, (int64_t)n * (cols + 5), 5.656854f);
    SD_CHECK(sd_cuda_scale(d_x, (size_t)n * (cols + 5), 5.656854f, 0, &eb) == SPECDEC_OK, "%s", eb.msg);
    CT_CUDA(cudaMemcpy(x, d_x, sizeof(float) * n * (cols + 5), cudaMemcpyDeviceToHost));
    SD_CHECK(ct_compare("scale (embedding)", x, xr, (size_t)n * (cols + 5), 0, 1e-6, 1e-6), "scale");
    cudaFree(d_gu); cudaFree(d_h); cudaFree(d_x);
    free(gu); free(ref); free(got); free(g); free(u); free(x); free(xr);
}

int main(void) {
    if (specdec_cuda_device_count() <= 0) return sd_test_skip("no CUDA device");
    ct_rng rng = {20261125};
    test_attention(&rng);
    test_rope_partial(&rng);
    test_head_norm(&rng);
    test_elementwise(&rng);
    return sd_test_done();
}
#endif
