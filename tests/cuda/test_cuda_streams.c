/* test_cuda_streams.c — launch infrastructure of issue 24 on a device (skips without one):
 *  (c) sd_cuda_stream_after orders two non-blocking streams with no host wait: a copy
 *      on stream B linked after a store that stream A makes 100 ms later sees the
 *      store; the same copy NOT linked does not (the control: the test can fail); the
 *      event is reused at once for another pair without breaking the first link;
 *  (e) the attention kernel's shared-memory opt-in is per device: head_dim 128 and 256
 *      (above 48 KB) run on every device in turn, device 0 first (skipped with one);
 *  (f) the multi-block verifier: an explicit block count whose cooperative grid cannot
 *      be co-resident is refused with SPECDEC_ERR_UNSUPPORTED (not a launch error), and
 *      AUTO on the same too-large shape falls back to the one-block kernel and decides. */
#include "sd_test.h"
#include "specdec.h"

#ifndef SPECDEC_WITH_CUDA
int main(void) { return sd_test_skip("no CUDA device"); }
#else

#include "cuda_test_util.h"
#include "sd_cuda_launch.h"
#include "sd_cuda_mb.h"
#include "sd_cuda_ops.h"
#include "sd_cuda_sample.h"

#define DELAY_NS 100000000ull /* 100 ms */

/* A store on `a` DELAY_NS from now; a copy of it on `b`, linked after `a` or not. */
static int32_t copy_after_store(cudaStream_t a, cudaStream_t b, cudaEvent_t ev, int link, int32_t *d, int32_t *h) {
    sd_errbuf eb;
    CT_CUDA(cudaMemset(d, 0, sizeof *d));
    CT_CUDA(cudaDeviceSynchronize());
    *h = -1;
    SD_CHECK(sd_cuda_delayed_store(d, 1, DELAY_NS, a, &eb) == SPECDEC_OK, "%s", eb.msg);
    if (link) SD_CHECK(sd_cuda_stream_after(b, a, ev, &eb) == SPECDEC_OK, "%s", eb.msg);
    CT_CUDA(cudaMemcpyAsync(h, d, sizeof *d, cudaMemcpyDeviceToHost, b));
    CT_CUDA(cudaStreamSynchronize(b));
    const int32_t got = *h;
    CT_CUDA(cudaDeviceSynchronize());
    return got;
}

static void test_order(void) {
    cudaStream_t a, b, c, d;
    cudaEvent_t ev;
    CT_CUDA(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CT_CUDA(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    CT_CUDA(cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking));
    CT_CUDA(cudaStreamCreateWithFlags(&d, cudaStreamNonBlocking));
    CT_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    int32_t *dx = ct_dev_alloc(2 * sizeof(int32_t)), *hx = NULL;
    CT_CUDA(cudaMallocHost((void **)&hx, 2 * sizeof(int32_t)));
    SD_CHECK(copy_after_store(a, b, ev, 1, dx, hx) == 1, "linked copy did not see the store");
    SD_CHECK(copy_after_store(a, b, ev, 0, dx, hx) == 0, "control: an unlinked copy waited anyway (cannot test)");
    /* the event reused at once: B after A, then D after C; B still waits for A */
    sd_errbuf eb;
    CT_CUDA(cudaMemset(dx, 0, 2 * sizeof(int32_t)));
    CT_CUDA(cudaDeviceSynchronize());
    SD_CHECK(sd_cuda_delayed_store(dx, 1, DELAY_NS, a, &eb) == SPECDEC_OK, "%s", eb.msg);
    SD_CHECK(sd_cuda_stream_after(b, a, ev, &eb) == SPECDEC_OK, "%s", eb.msg);
    SD_CHECK(sd_cuda_delayed_store(dx + 1, 1, 1000, c, &eb) == SPECDEC_OK, "%s", eb.msg);
    SD_CHECK(sd_cuda_stream_after(d, c, ev, &eb) == SPECDEC_OK, "%s", eb.msg);
    CT_CUDA(cudaMemcpyAsync(hx, dx, sizeof(int32_t), cudaMemcpyDeviceToHost, b));
    CT_CUDA(cudaMemcpyAsync(hx + 1, dx + 1, sizeof(int32_t), cudaMemcpyDeviceToHost, d));
    CT_CUDA(cudaDeviceSynchronize());
    SD_CHECK(hx[0] == 1 && hx[1] == 1, "reused event: %d %d", (int)hx[0], (int)hx[1]);
    SD_CHECK(sd_cuda_stream_after(a, a, ev, &eb) == SPECDEC_OK, "same stream");
    cudaFree(dx);
    cudaFreeHost(hx);
    cudaEventDestroy(ev);
    cudaStreamDestroy(a); cudaStreamDestroy(b); cudaStreamDestroy(c); cudaStreamDestroy(d);
}

/* One CHAIN-mode attention launch of head_dim hd on the current device. */
static specdec_status attention_once(int32_t hd, sd_errbuf *eb) {
    const int32_t nh = 4, nkv = 2, n = 3, n_ctx = 64;
    const size_t ce = (size_t)nkv * n_ctx * hd;
    float *q = ct_dev_alloc(sizeof(float) * n * nh * hd), *o = ct_dev_alloc(sizeof(float) * n * nh * hd);
    float *k = ct_dev_alloc(sizeof(float) * ce), *v = ct_dev_alloc(sizeof(float) * ce);
    const size_t pf = sd_cuda_attention_part_floats(n, nh, hd, n_ctx);
    float *part = ct_dev_alloc(sizeof(float) * pf);
    CT_CUDA(cudaMemset(q, 0, sizeof(float) * n * nh * hd));
    CT_CUDA(cudaMemset(k, 0, sizeof(float) * ce));
    CT_CUDA(cudaMemset(v, 0, sizeof(float) * ce));
    sd_cuda_attention_args aa = {.q = q, .ldq = nh * hd, .k_cache = k, .v_cache = v, .kv_dt = SD_F32,
                                 .cache_rows = n_ctx, .n_ctx = n_ctx, .n = n, .map = {.pos0 = 10, .block_tokens = 1},
                                 .n_heads = nh, .n_kv = nkv, .hd = hd, .part = part, .part_floats = pf, .out = o,
                                 .ldo = nh * hd};
    specdec_status st = sd_cuda_attention(&aa, 0, eb);
    if (st == SPECDEC_OK && cudaDeviceSynchronize() != cudaSuccess) st = SPECDEC_ERR_INTERNAL;
    cudaFree(q); cudaFree(o); cudaFree(k); cudaFree(v); cudaFree(part);
    return st;
}

static void test_optin_per_device(void) {
    const int n_dev = specdec_cuda_device_count();
    if (n_dev < 2) {
        printf("(e) skipped: %d device (the per-device opt-in needs two)\n", n_dev);
        return;
    }
    for (int dev = 0; dev < n_dev && dev < 4; dev++) {
        CT_CUDA(cudaSetDevice(dev));
        for (int32_t hd = 128; hd <= 256; hd *= 2) {
            sd_errbuf eb;
            const specdec_status st = attention_once(hd, &eb);
            SD_CHECK(st == SPECDEC_OK, "attention head_dim %d on device %d: %s", (int)hd, dev, eb.msg);
        }
    }
    CT_CUDA(cudaSetDevice(0));
}

/* A verifier launch of 64 rows (n_seq 16, gamma 3), V = 128256, blocks per row bpr. */
static specdec_status verify_64_rows(int32_t bpr, int32_t *n_out, sd_errbuf *eb) {
    const int32_t V = 128256, B = 16, g = 3, R = g + 1;
    float *L = ct_dev_alloc(sizeof(float) * (size_t)B * R * V);
    CT_CUDA(cudaMemset(L, 0, sizeof(float) * (size_t)B * R * V));
    int32_t *draft = ct_dev_alloc(sizeof(int32_t) * B * g), *out = ct_dev_alloc(sizeof(int32_t) * B * R);
    int32_t *nacc = ct_dev_alloc(sizeof(int32_t) * B);
    int64_t *pos = ct_dev_alloc(sizeof(int64_t) * B);
    CT_CUDA(cudaMemset(draft, 0, sizeof(int32_t) * B * g));
    CT_CUDA(cudaMemset(pos, 0, sizeof(int64_t) * B));
    const size_t wsb = sd_cuda_verify_ws_bytes(B, g, V);
    void *ws = ct_dev_alloc(wsb);
    specdec_status st = sd_cuda_verify_ws_init(ws, wsb, 0, eb);
    sd_cuda_verify_args a;
    memset(&a, 0, sizeof a);
    a.mode = SPECDEC_VERIFY_GREEDY, a.gamma = g, a.n_vocab = V, a.n_seq = B, a.sp = sd_rule_greedy_params();
    a.logits = L, a.ld_logits = V, a.logits_seq_stride = (int64_t)R * V;
    a.draft = draft, a.draft_stride = g, a.pos0 = pos, a.out_tokens = out, a.out_stride = R, a.out_n_accepted = nacc;
    a.blocks_per_row = bpr;
    if (st == SPECDEC_OK) st = sd_cuda_verify(&a, ws, wsb, 0, eb);
    if (st == SPECDEC_OK && cudaDeviceSynchronize() != cudaSuccess) st = SPECDEC_ERR_INTERNAL;
    CT_CUDA(cudaMemcpy(n_out, nacc, sizeof(int32_t) * B, cudaMemcpyDeviceToHost));
    cudaFree(L); cudaFree(draft); cudaFree(out); cudaFree(nacc); cudaFree(pos); cudaFree(ws);
    return st;
}

static void test_mb_fallback(void) {
    int32_t n[16];
    sd_errbuf eb;
    /* 64 blocks x 64 rows = 4096 co-resident blocks: more than any current GPU holds */
    SD_CHECK(verify_64_rows(64, n, &eb) == SPECDEC_ERR_UNSUPPORTED, "too large explicit grid: %s", eb.msg);
    SD_CHECK(cudaGetLastError() == cudaSuccess, "a refused plan left a CUDA error");
    for (int i = 0; i < 16; i++) n[i] = -1;
    SD_CHECK(verify_64_rows(SD_CUDA_MB_AUTO, n, &eb) == SPECDEC_OK, "AUTO on a too-large shape: %s", eb.msg);
    int ok = 1;
    for (int i = 0; i < 16; i++) ok &= n[i] == 3; /* all-zero logits: argmax 0 == every draft */
    SD_CHECK(ok, "AUTO fallback decided wrongly (n[0] = %d)", (int)n[0]);
}

int main(void) {
    if (specdec_cuda_device_count() <= 0) return sd_test_skip("no CUDA device");
    CT_CUDA(cudaSetDevice(0));
    test_order();
    test_optin_per_device();
    test_mb_fallback();
    return sd_test_done();
}
#endif
