/* test_sample_ref_ws.c — ONE workspace reused across launch shapes (issue 24 (a)), on
 * the host emulation of whole launches (sample_ref_ws.h: the kernels' own workspace
 * layouts, counters, barrier records, partials, histograms). Runs without a GPU.
 *
 * Before issue 24 the verifier's and the draft step's barrier counters and radix
 * histograms sat at offsets that moved with (n_seq, gamma): a round that changes γ
 * (adaptive γ, clipping near the context end) or the number of sequences on one
 * workspace read an earlier launch's rows as counters and histograms. Here:
 *  (1) verifier: 48 launches on one zero-filled-once workspace, shapes drawn at random
 *      (n_seq 1..4, γ 0..8, one-block or 1..8 blocks per row, three modes, the whole
 *      parameter grid); every launch's (n, tokens) and p rows must equal a fresh
 *      emulation of the same launch, no barrier may find a stale counter, and the
 *      control header must be all zero after every launch;
 *  (2) draft step: the same with 48 launches of 1..8 sequences;
 *  (3) the two pre-issue-24 faults, planted one at a time (histograms not zeroed at
 *      the kernel's start; barrier records at the start of the moving multi-block
 *      region), must each be caught by (1) + (2).
 * Fixed seeds; ~0.5 s Release. */
#include <stdio.h>
#include <stdlib.h>

#include "cs_common.h"
#include "sd_test.h"
#include "sample_ref_ws.h"

#define WS_V 4096
#define WS_MAX_SEQ 4
#define WS_LAUNCHES 48

typedef struct {
    float *L, *Q, *P, *qd, *qf, *ld;
    int32_t draft[WS_MAX_SEQ * 2 * SPECDEC_MAX_DRAFT], out[2][WS_MAX_SEQ * (SPECDEC_MAX_DRAFT + 1)];
    int32_t nacc[2][WS_MAX_SEQ * 2], tok[2][WS_MAX_SEQ * 2];
    uint32_t wa[WS_MAX_SEQ * SPECDEC_MAX_DRAFT], wsm[WS_MAX_SEQ * 2 * (SPECDEC_MAX_DRAFT + 1)];
    double *w;
} ws_bufs;

/* The parameters of launch i: every third greedy-free launch selects (top-k / top-p). */
static const sd_sampling_params *ws_params(cs_rng *r, specdec_verify_mode mode) {
    static const int sel[5] = {4, 7, 8, 11, 5};
    if (mode == SPECDEC_VERIFY_GREEDY) return &cs_params[10];
    const uint64_t c = cs_next(r);
    return c % 3 ? &cs_params[sel[(c / 3) % 5]] : &cs_params[(c / 3) % CS_NPARAMS];
}

static int32_t ws_nb(cs_rng *r) {
    const uint64_t c = cs_next(r) % 4;
    return c == 0 ? 0 : c == 1 ? 1 : 2 + (int32_t)(cs_next(r) % 7);
}

/* (1): the verifier's launches; returns mismatches + faults + dirty headers. */
static long verify_seq(unsigned char *ws, size_t wsb, ws_bufs *B, uint64_t seed) {
    cs_rng r = {seed};
    const specdec_verify_mode modes[3] = {SPECDEC_VERIFY_REJECTION, SPECDEC_VERIFY_GREEDY, SPECDEC_VERIFY_MATCH};
    long bad = 0;
    for (int it = 0; it < WS_LAUNCHES; it++) {
        srw_verify_args a;
        memset(&a, 0, sizeof a);
        a.mode = modes[cs_next(&r) % 3];
        a.n_seq = 1 + (int32_t)(cs_next(&r) % WS_MAX_SEQ);
        a.gamma = (int32_t)(cs_next(&r) % 9);
        a.V = WS_V;
        a.nb = ws_nb(&r);
        a.sp = ws_params(&r, a.mode);
        const int32_t R1 = a.gamma + 1;
        for (int32_t k = 0; k < a.n_seq * R1; k++) cs_logits(&r, k % 5 == 4 ? CS_TIES : CS_NOISY, B->L + (size_t)k * WS_V, WS_V);
        for (int32_t k = 0; k < a.n_seq * a.gamma; k++) {
            cs_logits(&r, CS_NOISY, B->ld, WS_V);
            (void)srm_process(B->ld, WS_V, a.sp, 1, B->w, B->Q + (size_t)k * WS_V);
        }
        for (int32_t k = 0; k < a.n_seq * SPECDEC_MAX_DRAFT; k++) {
            B->draft[k] = (int32_t)(cs_next(&r) % WS_V);
            B->wa[k] = (uint32_t)cs_next(&r);
        }
        for (int32_t k = 0; k < a.n_seq * (SPECDEC_MAX_DRAFT + 1); k++) B->wsm[k] = (uint32_t)cs_next(&r);
        a.L = B->L, a.Q = B->Q, a.draft = B->draft, a.wacc = B->wa, a.wsmp = B->wsm;
        /* the reference: the same launch on the model without any workspace */
        for (int32_t b = 0; b < a.n_seq; b++) {
            B->nacc[0][b] = srm_verify(a.mode, a.gamma, WS_V, a.nb > 0 ? a.nb : 1, B->L + (size_t)b * R1 * WS_V, a.sp,
                                       B->Q + (size_t)b * a.gamma * WS_V, B->draft + (size_t)b * SPECDEC_MAX_DRAFT,
                                       B->wa + (size_t)b * SPECDEC_MAX_DRAFT, B->wsm + (size_t)b * (SPECDEC_MAX_DRAFT + 1),
                                       B->w, B->P + (size_t)b * R1 * WS_V, B->out[0] + (size_t)b * (SPECDEC_MAX_DRAFT + 1));
        }
        for (int32_t k = 0; k < a.n_seq; k++) B->nacc[1][k] = -1;
        memset(B->out[1], 0xff, sizeof B->out[1]);
        a.out = B->out[1], a.n_acc = B->nacc[1];
        const int faults = srw_verify(ws, wsb, &a, B->w);
        SD_CHECK(faults >= 0, "launch %d does not fit the workspace", it);
        long diff = faults > 0;
        const float *Pws = (const float *)(ws + sd_verify_ws_layout(a.n_seq, a.gamma, WS_V).p);
        diff += memcmp(Pws, B->P, sizeof(float) * (size_t)a.n_seq * R1 * WS_V) != 0;
        for (int32_t b = 0; b < a.n_seq; b++) {
            const int32_t n = B->nacc[0][b];
            diff += B->nacc[1][b] != n;
            for (int32_t i = 0; i <= n && B->nacc[1][b] == n; i++)
                diff += B->out[0][b * (SPECDEC_MAX_DRAFT + 1) + i] != B->out[1][b * (SPECDEC_MAX_DRAFT + 1) + i];
        }
        diff += !srw_header_clean(ws);
        if (diff && srw_mutant == SRW_NONE && bad < 3)
            fprintf(stderr, "  verify launch %d (n_seq %d, gamma %d, nb %d, mode %d, T %.1f k %d p %.2f): %d faults, "
                            "%ld differences\n",
                    it, (int)a.n_seq, (int)a.gamma, (int)a.nb, (int)a.mode, (double)a.sp->temperature,
                    (int)a.sp->top_k, (double)a.sp->top_p, faults, diff);
        bad += diff > 0;
    }
    return bad;
}

/* (2): the draft step's launches. */
static long draft_seq(unsigned char *ws, size_t wsb, ws_bufs *B, uint64_t seed) {
    cs_rng r = {seed};
    const specdec_verify_mode modes[3] = {SPECDEC_VERIFY_REJECTION, SPECDEC_VERIFY_GREEDY, SPECDEC_VERIFY_MATCH};
    long bad = 0;
    for (int it = 0; it < WS_LAUNCHES; it++) {
        const specdec_verify_mode mode = modes[cs_next(&r) % 3];
        const int32_t n_seq = 1 + (int32_t)(cs_next(&r) % (2 * WS_MAX_SEQ)), nb = ws_nb(&r);
        const sd_sampling_params *sp = ws_params(&r, mode);
        for (int32_t b = 0; b < n_seq; b++) {
            cs_logits(&r, b % 3 == 2 ? CS_TIES : CS_NOISY, B->L + (size_t)b * WS_V, WS_V);
            B->wsm[b] = (uint32_t)cs_next(&r);
            B->tok[0][b] = srm_draft(mode, B->L + (size_t)b * WS_V, WS_V, sp, nb > 0 ? nb : 1, B->wsm[b], B->w,
                                     B->qd + (size_t)b * WS_V);
        }
        const int faults = srw_draft(ws, wsb, mode, WS_V, n_seq, nb, sp, B->L, B->wsm, B->qf, B->tok[1], B->w);
        SD_CHECK(faults >= 0, "draft launch %d does not fit the workspace", it);
        long diff = faults > 0;
        diff += memcmp(B->qd, B->qf, sizeof(float) * (size_t)n_seq * WS_V) != 0;
        diff += memcmp(B->tok[0], B->tok[1], sizeof(int32_t) * (size_t)n_seq) != 0;
        diff += !srw_header_clean(ws);
        if (diff && srw_mutant == SRW_NONE && bad < 3)
            fprintf(stderr, "  draft launch %d (n_seq %d, nb %d): %d faults, %ld differences\n", it, (int)n_seq,
                    (int)nb, faults, diff);
        bad += diff > 0;
    }
    return bad;
}

/* Both sequences on fresh zero-filled workspaces sized for the largest shapes. */
static long run_all(ws_bufs *B) {
    const size_t vb = sd_verify_ws_layout(WS_MAX_SEQ, 8, WS_V).total + SRW_SLACK;
    const size_t db = sd_draft_ws_layout(2 * WS_MAX_SEQ, WS_V).total + SRW_SLACK;
    unsigned char *vws = calloc(1, vb), *dws = calloc(1, db);
    SD_CHECK(vws && dws, "out of memory");
    const long bad = verify_seq(vws, vb, B, 0x24a) + draft_seq(dws, db, B, 0x24b);
    free(vws);
    free(dws);
    return bad;
}

int main(void) {
    ws_bufs B;
    const size_t rows = (size_t)WS_MAX_SEQ * 2 * (SPECDEC_MAX_DRAFT + 1);
    B.L = malloc(sizeof(float) * rows * WS_V);
    B.Q = malloc(sizeof(float) * rows * WS_V);
    B.P = malloc(sizeof(float) * rows * WS_V);
    B.qd = malloc(sizeof(float) * rows * WS_V);
    B.qf = malloc(sizeof(float) * rows * WS_V);
    B.ld = malloc(sizeof(float) * WS_V);
    B.w = malloc(sizeof(double) * WS_V);
    SD_CHECK(B.L && B.Q && B.P && B.qd && B.qf && B.ld && B.w, "out of memory");
    /* the layouts: header first and fixed, every region inside the total */
    for (int32_t n = 1; n <= 64; n *= 4)
        for (int32_t g = 0; g <= SPECDEC_MAX_DRAFT; g += 4) {
            const sd_verify_layout L = sd_verify_ws_layout(n, g, 1000);
            SD_CHECK(L.counters == 0 && L.mb_ctrl == SD_WS_CTRL_OFF && L.outcomes == SD_WS_HEADER_BYTES && L.p > L.outcomes &&
                         L.w > L.p && L.total > L.w && (n * (g + 1) > SD_MB_MAX_ROWS) == (L.mb_parts == 0),
                     "verify layout (n_seq %d, gamma %d)", (int)n, (int)g);
        }
    SD_CHECK(sd_verify_ws_layout(SD_CUDA_VERIFY_MAX_SEQ + 1, 4, 1000).total == 0, "n_seq above the limit accepted");
    SD_CHECK(SD_WS_CTRL_OFF >= (size_t)SD_CUDA_VERIFY_MAX_SEQ * sizeof(uint32_t), "counters overlap the barrier records");

    const long bad = run_all(&B);
    printf("one workspace, %d verifier + %d draft launches of varying shapes: %ld differ\n", WS_LAUNCHES, WS_LAUNCHES, bad);
    SD_CHECK(bad == 0, "%ld launches on a reused workspace differ from fresh ones", bad);
    static const char *const names[SRW_NMUT] = {"", "histograms not zeroed at the start", "moving barrier records"};
    for (int m = 1; m < SRW_NMUT; m++) {
        srw_mutant = m;
        const long mb = run_all(&B);
        srw_mutant = SRW_NONE;
        printf("mutant '%s': %ld launches differ\n", names[m], mb);
        SD_CHECK(mb > 0, "mutant '%s' not caught", names[m]);
    }
    free(B.L); free(B.Q); free(B.P); free(B.qd); free(B.qf); free(B.ld); free(B.w);
    return sd_test_done();
}
