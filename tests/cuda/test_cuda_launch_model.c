/* test_cuda_launch_model.c — launch decisions of the CUDA kernels, run on the CPU (no GPU
 * needed; every build, also under ASan). The launchers take these decisions through the
 * same header-only functions:
 *  (b) the attention split scratch (kernels/cuda/sd_cuda_keymap.h: sd_keymap_part_*,
 *      sd_keymap_key_bound): the need of a launch from (tokens, position / key bound,
 *      heads, head_dim, splits) at the extremes, exactly (128-bit reference), overflow
 *      and bad arguments, the inverse (rows that fit), the last state written ends
 *      exactly at the need; and the finding's case — a CHAIN launch of a whole body
 *      chunk at the end of a long context needs far more than the runner's scratch for
 *      att_rows tokens — must be refused, while the runner's att_rows pieces fit;
 *  (e) the shared-memory opt-in cached per DEVICE (kernels/cuda/sd_cuda_launch.h): a
 *      device model where an attribute set on one device does not hold on another;
 *      launches alternating over devices must always find their device opted in; the
 *      old per-process flag (planted) must fail that;
 *  (f) the multi-block plan (kernels/cuda/sd_cuda_mb.h: sd_mb_plan_blocks) on made-up
 *      devices: a cooperative launch that cannot be co-resident, no cooperative launch,
 *      too little shared memory, no resident block, too many rows — AUTO always falls
 *      back (nb = 0, never an error), an explicit count is refused; and for 20000 random
 *      devices / shapes every plan with nb > 1 is co-resident and cooperative. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sd_cuda_keymap.h"
#include "sd_cuda_launch.h"
#include "sd_cuda_mb.h"
#include "sd_test.h"
#include "sd_test_util.h"

typedef unsigned __int128 u128;

static uint64_t g_rng = 0x24b24e24full;
static int64_t rnd(int64_t n) { return (int64_t)(sd_test_splitmix64(&g_rng) % (uint64_t)n); }

/* The runner's scratch rows (backends/cuda/sd_cuda_runner.cu sd_att_rows): 64 MiB of
 * states, at least min(act_rows, 17) rows, at most act_rows. */
static int32_t runner_att_rows(int32_t n_heads, int32_t hd, int32_t n_ctx, int32_t act_rows) {
    const size_t per_row = sd_keymap_part_floats(1, n_heads, hd, n_ctx) * sizeof(float);
    size_t rows = ((size_t)64 << 20) / per_row;
    const size_t lo = act_rows < 17 ? (size_t)act_rows : 17;
    if (rows < lo) rows = lo;
    if (rows > (size_t)act_rows) rows = (size_t)act_rows;
    return (int32_t)rows;
}

static void test_part_sizing(void) {
    SD_CHECK(sd_keymap_part_splits(1) == 1 && sd_keymap_part_splits(SD_CUDA_ATTN_SPLIT) == 1 &&
                 sd_keymap_part_splits(SD_CUDA_ATTN_SPLIT + 1) == 2 && sd_keymap_part_splits(131072) == 1024 &&
                 sd_keymap_part_splits(INT32_MAX) == (INT32_MAX - 1) / SD_CUDA_ATTN_SPLIT + 1 &&
                 sd_keymap_part_splits(0) == 0 && sd_keymap_part_splits(-5) == 0,
             "split counts");
    SD_CHECK(sd_keymap_part_floats(1, 1, 1, 1) == 3, "smallest launch");
    SD_CHECK(sd_keymap_part_floats(0, 8, 64, 10) == 0 && sd_keymap_part_floats(4, 0, 64, 10) == 0 &&
                 sd_keymap_part_floats(4, 8, 0, 10) == 0 && sd_keymap_part_floats(4, 8, 64, 0) == 0,
             "bad arguments give 0");
    SD_CHECK(sd_keymap_part_floats(INT64_MAX, 128, 256, INT32_MAX) == SIZE_MAX, "overflow gives SIZE_MAX");
    /* exact against 128-bit arithmetic, extremes and random */
    const int64_t ns[] = {1, 17, 512, 65535, (int64_t)1 << 40};
    const int32_t hs[] = {1, 8, 64, 128}, ds[] = {1, 64, 128, 256};
    const int64_t ks[] = {1, 127, 128, 129, 131072, INT32_MAX};
    long bad = 0;
    for (int a = 0; a < 5; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 4; c++)
                for (int d = 0; d < 6; d++) {
                    const u128 exact = (u128)ns[a] * (u128)hs[b] * (u128)((ks[d] + 127) / 128) * (u128)(ds[c] + 2);
                    const size_t got = sd_keymap_part_floats(ns[a], hs[b], ds[c], ks[d]);
                    bad += exact > (u128)SIZE_MAX ? got != SIZE_MAX : got != (size_t)exact;
                    if (exact > (u128)SIZE_MAX) continue;
                    /* the last state of the launch ends exactly at the need */
                    const int32_t nsp = sd_keymap_part_splits(ks[d]);
                    if (ns[a] <= INT32_MAX)
                        bad += sd_keymap_part_at((int32_t)(ns[a] - 1), hs[b] - 1, nsp - 1, hs[b], nsp, ds[c]) +
                                   (size_t)(ds[c] + 2) != got;
                    /* rows that fit: part_rows(need) >= n and one more does not fit */
                    const int32_t r = sd_keymap_part_rows(got, hs[b], ds[c], ks[d]);
                    const int64_t want = ns[a] > INT32_MAX ? INT32_MAX : ns[a];
                    bad += r != want;
                    bad += sd_keymap_part_rows(got - 1, hs[b], ds[c], ks[d]) != ns[a] - 1 && ns[a] <= INT32_MAX;
                }
    SD_CHECK(bad == 0, "%ld sizing mismatches at the extremes", bad);
    SD_CHECK(sd_keymap_part_rows(1000, 0, 64, 10) == 0 && sd_keymap_part_rows(1000, 8, 64, 0) == 0, "rows of bad args");
}

static void test_key_bound(void) {
    sd_cuda_keymap k;
    memset(&k, 0, sizeof k);
    k.block_tokens = 16;
    k.pos0 = 1000 - 24; /* CHAIN, host position: the last position + 1 */
    SD_CHECK(sd_keymap_key_bound(&k, 24, 1000, 1000) == 1000, "chain launch ending at n_ctx");
    SD_CHECK(sd_keymap_key_bound(&k, 25, 1000, 1000) == -1, "chain launch past n_ctx");
    k.pos0 = -1;
    SD_CHECK(sd_keymap_key_bound(&k, 1, 1000, 1000) == -1, "negative position");
    k.pos0 = 0;
    SD_CHECK(sd_keymap_key_bound(&k, 5, 1000, 4) == -1, "contiguous cache shorter than the keys");
    k.table = (const int32_t *)&k; /* any non-NULL table: rows through it */
    SD_CHECK(sd_keymap_key_bound(&k, 5, 1000, 4) == 5, "paged chain");
    const int64_t dpos = 7;
    k.pos_dev = &dpos; /* device position: n_ctx, whatever the position */
    SD_CHECK(sd_keymap_key_bound(&k, 5, 131072, 16) == 131072, "device position bound");
    SD_CHECK(sd_keymap_key_bound(&k, 0, 1000, 16) == -1 && sd_keymap_key_bound(&k, 1001, 1000, 16) == -1, "token count");
    sd_cuda_tokmap tk;
    sd_cuda_attblk blk;
    memset(&tk, 0, sizeof tk);
    memset(&blk, 0, sizeof blk);
    k.tok = &tk; /* GENERAL */
    k.blk = &blk;
    k.n_blk = 1;
    k.max_keys = 300;
    SD_CHECK(sd_keymap_key_bound(&k, 3, 1000, 16) == 300, "general bound");
    k.max_keys = 1001;
    SD_CHECK(sd_keymap_key_bound(&k, 3, 1000, 16) == -1, "general bound above n_ctx");
}

/* The finding: the runner's scratch holds att_rows tokens over n_ctx keys; a CHAIN
 * launch of a whole chunk (act_rows tokens) at the end of the context needs more and
 * must be refused; the runner's att_rows pieces at any position fit. */
static void test_runner_chain(void) {
    const int32_t ctxs[] = {128, 4096, 32768, 131072}, heads[] = {8, 32, 64}, hds[] = {64, 128, 256};
    long refused = 0, bad = 0;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 3; c++) {
                const int32_t n_ctx = ctxs[a], act = n_ctx < 512 ? n_ctx : 512;
                const int32_t att = runner_att_rows(heads[b], hds[c], n_ctx, act);
                const size_t cap = sd_keymap_part_floats(att, heads[b], hds[c], n_ctx);
                const sd_cuda_keymap whole = {.block_tokens = 16, .pos0 = n_ctx - act};
                const size_t need = sd_keymap_part_floats(act, heads[b], hds[c],
                                                          sd_keymap_key_bound(&whole, act, n_ctx, n_ctx));
                refused += need > cap;              /* the launcher's check */
                bad += (need > cap) != (att < act); /* refused exactly when the chunk is cut */
                for (int32_t q0 = 0; q0 < act; q0 += att) { /* the runner's pieces */
                    const int32_t n = act - q0 < att ? act - q0 : att;
                    sd_cuda_keymap piece = whole;
                    piece.pos0 = whole.pos0 + q0;
                    bad += sd_keymap_part_floats(n, heads[b], hds[c], sd_keymap_key_bound(&piece, n, n_ctx, n_ctx)) > cap;
                }
                bad += sd_keymap_part_rows(cap, heads[b], hds[c], n_ctx) < att;
            }
    printf("(b) whole-chunk chain launches refused in %ld of 36 runner shapes; every att_rows piece fits\n", refused);
    SD_CHECK(bad == 0, "%ld runner chain launches mis-sized", bad);
    SD_CHECK(refused >= 10, "the long-context cases were not exercised (%ld)", refused);
}

/* (e): a device model (the attribute per device) and launches over several devices. */
static int optin_sequence(int per_process) {
    static const int devs[] = {0, 0, 1, 0, 2, 1, 3, 3, 0, 63, 64, -1, 1000, 2};
    int attr[SD_CUDA_MAX_DEVICES + 1] = {0}; /* [64]: every out-of-range id */
    sd_cuda_dev_once once;
    memset(&once, 0, sizeof once);
    int missing = 0, setups = 0;
    for (size_t i = 0; i < sizeof devs / sizeof devs[0]; i++) {
        const int dev = devs[i], slot = dev >= 0 && dev < SD_CUDA_MAX_DEVICES ? dev : SD_CUDA_MAX_DEVICES;
        const int key = per_process ? 0 : dev; /* the planted fault: one flag for the process */
        if (slot == SD_CUDA_MAX_DEVICES) attr[slot] = 0; /* an unknown device: never assume */
        if (sd_cuda_once_needed(&once, key)) {
            attr[slot] = 1; /* cudaFuncSetAttribute on the current device */
            setups++;
            sd_cuda_once_done(&once, key);
        }
        missing += !attr[slot]; /* the launch would fail: too many resources requested */
    }
    return per_process ? missing : (missing ? -1 : setups);
}

static void test_optin(void) {
    const int setups = optin_sequence(0);
    SD_CHECK(setups == 8, "per-device opt-in: %d set-ups (want 5 devices once + 3 uncached ids)", setups);
    SD_CHECK(optin_sequence(1) > 0, "the per-process flag (planted) was not caught");
    sd_cuda_dev_once o;
    memset(&o, 0, sizeof o);
    sd_cuda_once_done(&o, 5);
    SD_CHECK(!sd_cuda_once_needed(&o, 5) && sd_cuda_once_needed(&o, 4) && sd_cuda_once_needed(&o, -1) &&
                 sd_cuda_once_needed(&o, SD_CUDA_MAX_DEVICES),
             "once flags");
}

static int plan(const sd_mb_dev *d, size_t smem, int32_t V, int64_t rows, int32_t req, int32_t *nb) {
    return sd_mb_plan_blocks(d, smem, V, rows, req, nb);
}

static void test_mb_plan(void) {
    const size_t smem = 92 * 1024;
    const sd_mb_dev h100 = {132, 2, 1, 227 * 1024};
    int32_t nb = -7;
    SD_CHECK(plan(&h100, smem, 128256, 5, SD_MB_AUTO, &nb) == SD_MB_PLAN_OK && nb == 52, "H100 gamma 4: nb %d", (int)nb);
    SD_CHECK(plan(&h100, smem, 128256, 5, 52, &nb) == SD_MB_PLAN_OK && nb == 52, "explicit 52");
    SD_CHECK(plan(&h100, smem, 128256, 5, 64, &nb) == SD_MB_PLAN_UNSUPPORTED && nb == 0, "64 x 5 > 264 resident");
    SD_CHECK(plan(&h100, smem, 128256, 64, SD_MB_AUTO, &nb) == SD_MB_PLAN_OK && nb == 0, "64 rows: one-block");
    SD_CHECK(plan(&h100, smem, 4096, 65, SD_MB_AUTO, &nb) == SD_MB_PLAN_OK && nb == 0, "65 rows: one-block");
    SD_CHECK(plan(&h100, smem, 100, 3, SD_MB_AUTO, &nb) == SD_MB_PLAN_OK && nb == 1, "tiny V: one chunk");
    /* a small GPU: the cooperative grid cannot be co-resident -> fall back, never fail */
    const sd_mb_dev small = {8, 1, 1, 227 * 1024};
    SD_CHECK(plan(&small, smem, 128256, 1, SD_MB_AUTO, &nb) == SD_MB_PLAN_OK && nb == 0, "small GPU AUTO: nb %d", (int)nb);
    SD_CHECK(plan(&small, smem, 128256, 1, 32, &nb) == SD_MB_PLAN_UNSUPPORTED, "small GPU explicit 32");
    SD_CHECK(plan(&small, smem, 4096, 5, SD_MB_AUTO, &nb) == SD_MB_PLAN_OK && nb == 1, "small GPU, one chunk per row");
    /* no cooperative launch: only one block per row */
    const sd_mb_dev nocoop = {132, 2, 0, 227 * 1024};
    SD_CHECK(plan(&nocoop, smem, 128256, 5, SD_MB_AUTO, &nb) == SD_MB_PLAN_OK && nb == 0, "no coop, V 128256");
    SD_CHECK(plan(&nocoop, smem, 4000, 5, SD_MB_AUTO, &nb) == SD_MB_PLAN_OK && nb == 1, "no coop, V 4000");
    SD_CHECK(plan(&nocoop, smem, 32000, 5, 8, &nb) == SD_MB_PLAN_UNSUPPORTED, "no coop, explicit 8");
    SD_CHECK(plan(&nocoop, smem, 32000, 5, 1, &nb) == SD_MB_PLAN_UNSUPPORTED, "no coop, explicit 1 with V 32000");
    /* too little shared memory / nothing resident */
    const sd_mb_dev lowsmem = {132, 2, 1, 64 * 1024}, none = {132, 0, 1, 227 * 1024};
    SD_CHECK(plan(&lowsmem, smem, 32000, 5, SD_MB_AUTO, &nb) == SD_MB_PLAN_OK && nb == 0, "64 KB opt-in: one-block");
    SD_CHECK(plan(&lowsmem, smem, 4096, 1, 1, &nb) == SD_MB_PLAN_UNSUPPORTED, "64 KB opt-in: explicit refused");
    SD_CHECK(plan(&none, smem, 32000, 5, SD_MB_AUTO, &nb) == SD_MB_PLAN_OK && nb == 0, "no resident block");
    /* random devices and shapes: the plan's promises */
    long bad = 0, multi = 0;
    for (int it = 0; it < 20000; it++) {
        const sd_mb_dev d = {(int)rnd(200), (int)rnd(5), (int)rnd(2), (size_t)(32 + rnd(200)) * 1024};
        const int32_t V = 1 + (int32_t)rnd(262144);
        const int64_t rows = 1 + rnd(80);
        const int32_t req = rnd(3) ? SD_MB_AUTO : (int32_t)(1 + rnd(70));
        const int st = plan(&d, smem, V, rows, req, &nb);
        if (req == SD_MB_AUTO) bad += st != SD_MB_PLAN_OK;
        if (st != SD_MB_PLAN_OK) {
            bad += nb != 0;
            continue;
        }
        if (nb == 0) {
            bad += req != SD_MB_AUTO;
            continue;
        }
        multi += nb > 1;
        bad += nb < sd_mb_min_blocks(V) || nb > SD_MB_MAX_BLOCKS || rows > SD_MB_MAX_ROWS || smem > d.smem_optin ||
               d.per_sm < 1 || d.sms < 1 || (req != SD_MB_AUTO && nb != req);
        bad += nb > 1 && (!d.coop || (int64_t)nb * rows > (int64_t)d.sms * d.per_sm);
    }
    printf("(f) 20000 random plans: %ld multi-block launches, all co-resident and cooperative\n", multi);
    SD_CHECK(bad == 0 && multi > 300, "%ld plans break a promise (%ld multi-block)", bad, multi);
}

int main(void) {
    test_part_sizing();
    test_key_bound();
    test_runner_chain();
    test_optin();
    test_mb_plan();
    return sd_test_done();
}
