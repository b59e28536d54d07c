/* sample_ref_ws.h — host emulation of whole LAUNCHES of the verifier and the draft step
 * on one emulated workspace (issue 24 (a)): a byte array laid out by the kernels' own
 * sd_verify_ws_layout / sd_draft_ws_layout (kernels/cuda/sd_cuda_mb.h), into which every
 * launch writes what the kernels write, where they write it —
 *   one-block verifier (nb = 0): per-sequence counters (the last row's block runs the
 *     acceptance chain when its atomicAdd returns gamma, then resets the counter), the
 *     outcomes, the p rows, the w rows;
 *   multi-block verifier / draft step (nb >= 1): per row the barrier record, the
 *     partials, the radix histograms (sample_ref_mb.h's srm_ws emulation), the outcomes
 *     and p rows, then the chain kernel;
 *   one-block draft step: the w rows.
 * Values come from sample_ref_mb.h (bitwise the kernels' and the CPU's). A launch that
 * starts on stale state — a barrier counter or histogram left by a launch of another
 * shape — then gives other tokens or trips a barrier (*faults), as it would on the GPU.
 *
 * srw_mutant plants the pre-issue-24 faults the test must catch: SRW_NO_CLEAR (the
 * kernel does not zero its histogram slots at its start), SRW_MOVING_CTRL (the barrier
 * records at the start of the shape-dependent multi-block region, as before: the
 * workspace needs SRW_SLACK spare bytes for it). Header-only, plain C, tests only. */
#ifndef SAMPLE_REF_WS_H
#define SAMPLE_REF_WS_H

#include "sample_ref_mb.h"

enum { SRW_NONE, SRW_NO_CLEAR, SRW_MOVING_CTRL, SRW_NMUT };
static int srw_mutant = SRW_NONE;
#define SRW_SLACK ((size_t)SD_MB_MAX_ROWS * sizeof(sd_mb_ctrl) + SD_WS_ALIGN)

/* The multi-block records of a launch of `rows` rows (mutant: the old carve). */
static inline void srw_records(unsigned char *ws, size_t ctrl_off, size_t parts_off, size_t hist_off, int64_t rows,
                               sd_mb_ctrl **ctrl, sd_mb_part **parts, sd_mb_hist **hist) {
    if (srw_mutant == SRW_MOVING_CTRL) {
        const size_t c = sd_ws_al((size_t)rows * sizeof(sd_mb_ctrl));
        ctrl_off = parts_off, parts_off += c, hist_off += c;
    }
    *ctrl = (sd_mb_ctrl *)(ws + ctrl_off);
    *parts = (sd_mb_part *)(ws + parts_off);
    *hist = (sd_mb_hist *)(ws + hist_off);
}

/* Row `row` of a multi-block launch: its records in the workspace. */
static inline srm_ws_row srw_row(sd_mb_ctrl *ctrl, sd_mb_part *parts, sd_mb_hist *hist, int64_t row, int32_t nb) {
    srm_ws_row R;
    memset(&R, 0, sizeof R);
    R.ctrl = ctrl + row;
    R.parts = parts + (size_t)row * 2 * SD_MB_MAX_BLOCKS;
    R.hist = hist + (size_t)row * SD_MB_HBUFS;
    R.nb = nb;
    R.pending = -1;
    R.no_clear = srw_mutant == SRW_NO_CLEAR;
    return R;
}

/* The acceptance chain of one sequence from its outcome records (both kernels). */
static inline int32_t srw_chain(specdec_verify_mode mode, int32_t g, const int32_t *oc, const int32_t *draft,
                                int32_t *out) {
    int32_t n = 0;
    if (mode == SPECDEC_VERIFY_REJECTION)
        while (n < g && oc[2 * n + 1]) n++;
    else
        while (n < g && draft[n] == oc[2 * n]) n++;
    for (int32_t i = 0; i < n; i++) out[i] = draft[i];
    out[n] = oc[2 * n];
    return n;
}

typedef struct srw_verify_args {
    specdec_verify_mode mode;
    int32_t gamma, V, n_seq, nb;  /* nb 0: the one-block kernel */
    const sd_sampling_params *sp;
    const float *L;               /* target logits [n_seq][gamma + 1][V] */
    const float *Q;               /* draft rows [n_seq][gamma][V] */
    const int32_t *draft;         /* [n_seq][SPECDEC_MAX_DRAFT] */
    const uint32_t *wacc, *wsmp;  /* [n_seq][SPECDEC_MAX_DRAFT], [n_seq][SPECDEC_MAX_DRAFT + 1] */
    int32_t *out;                 /* [n_seq][SPECDEC_MAX_DRAFT + 1] */
    int32_t *n_acc;               /* [n_seq] */
} srw_verify_args;

/* One verifier launch on ws (>= sd_verify_ws_layout(...).total (+ SRW_SLACK) bytes);
 * wpriv: V doubles (a multi-block block's weights live in shared memory). Returns the
 * barrier faults; -1 when the shape does not fit ws. */
static inline int srw_verify(unsigned char *ws, size_t ws_bytes, const srw_verify_args *a, double *wpriv) {
    const sd_verify_layout L = sd_verify_ws_layout(a->n_seq, a->gamma, a->V);
    const int32_t g = a->gamma, V = a->V, R1 = g + 1;
    if (L.total == 0 || L.total + SRW_SLACK > ws_bytes || (a->nb > 0 && L.mb_parts == 0)) return -1;
    uint32_t *counters = (uint32_t *)(ws + L.counters);
    int32_t *oc = (int32_t *)(ws + L.outcomes);
    float *P = (float *)(ws + L.p);
    double *W = (double *)(ws + L.w);
    sd_mb_ctrl *ctrl = NULL;
    sd_mb_part *parts = NULL;
    sd_mb_hist *hist = NULL;
    if (a->nb > 0) srw_records(ws, L.mb_ctrl, L.mb_parts, L.mb_hist, (int64_t)a->n_seq * R1, &ctrl, &parts, &hist);
    int faults = 0;
    for (int32_t b = 0; b < a->n_seq; b++) {
        int32_t *ob = oc + (size_t)b * (SPECDEC_MAX_DRAFT + 1) * 2;
        for (int32_t r = 0; r <= g; r++) {
            const int64_t row = (int64_t)b * R1 + r;
            srm_ws_row rec;
            if (a->nb > 0) rec = srw_row(ctrl, parts, hist, row, a->nb), srm_ws = &rec;
            float *p = P + (size_t)row * V;
            const int32_t nb = a->nb > 0 ? a->nb : 1;
            const int32_t am = srm_process(a->L + (size_t)row * V, V, a->sp, nb, a->nb > 0 ? wpriv : W + (size_t)row * V, p);
            int32_t tok = 0;
            int acc = 0;
            const float *q = r < g ? a->Q + ((size_t)b * g + r) * V : NULL;
            srm_row_outcome(a->mode, r, g, V, nb, p, am, q, r < g ? a->draft[(size_t)b * SPECDEC_MAX_DRAFT + r] : -1,
                            r < g ? a->wacc[(size_t)b * SPECDEC_MAX_DRAFT + r] : 0u,
                            a->wsmp[(size_t)b * (SPECDEC_MAX_DRAFT + 1) + r], &tok, &acc);
            ob[2 * r] = tok;
            ob[2 * r + 1] = acc;
            if (a->nb > 0) {
                srm_exit();
                faults += rec.fault;
                srm_ws = NULL;
                continue;
            }
            if (counters[b]++ == (uint32_t)g) { /* the last block of the sequence (sd_rule_verify_kernel) */
                a->n_acc[b] = srw_chain(a->mode, g, ob, a->draft + (size_t)b * SPECDEC_MAX_DRAFT,
                                        a->out + (size_t)b * (SPECDEC_MAX_DRAFT + 1));
                counters[b] = 0;
            }
        }
    }
    for (int32_t b = 0; a->nb > 0 && b < a->n_seq; b++) /* sd_mb_chain_kernel */
        a->n_acc[b] = srw_chain(a->mode, g, oc + (size_t)b * (SPECDEC_MAX_DRAFT + 1) * 2,
                                a->draft + (size_t)b * SPECDEC_MAX_DRAFT, a->out + (size_t)b * (SPECDEC_MAX_DRAFT + 1));
    return faults;
}

/* One draft step of n_seq sequences (logits [n_seq][V], words [n_seq]) on ws; q rows to
 * q [n_seq][V], tokens to tok. Returns the barrier faults, -1 when it does not fit. */
static inline int srw_draft(unsigned char *ws, size_t ws_bytes, specdec_verify_mode mode, int32_t V, int32_t n_seq,
                            int32_t nb, const sd_sampling_params *sp, const float *logits, const uint32_t *words,
                            float *q, int32_t *tok, double *wpriv) {
    const sd_draft_layout L = sd_draft_ws_layout(n_seq, V);
    if (L.total == 0 || L.total + SRW_SLACK > ws_bytes || (nb > 0 && L.mb_parts == 0)) return -1;
    sd_mb_ctrl *ctrl = NULL;
    sd_mb_part *parts = NULL;
    sd_mb_hist *hist = NULL;
    if (nb > 0) srw_records(ws, L.mb_ctrl, L.mb_parts, L.mb_hist, n_seq, &ctrl, &parts, &hist);
    int faults = 0;
    for (int32_t b = 0; b < n_seq; b++) {
        srm_ws_row rec;
        if (nb > 0) rec = srw_row(ctrl, parts, hist, b, nb), srm_ws = &rec;
        double *w = nb > 0 ? wpriv : (double *)(ws + L.w) + (size_t)b * V;
        tok[b] = srm_draft(mode, logits + (size_t)b * V, V, sp, nb > 0 ? nb : 1, words[b], w, q + (size_t)b * V);
        if (nb > 0) {
            srm_exit();
            faults += rec.fault;
            srm_ws = NULL;
        }
    }
    return faults;
}

/* The control header is all zero (what every launch must leave). */
static inline int srw_header_clean(const unsigned char *ws) {
    for (size_t i = 0; i < SD_WS_HEADER_BYTES; i++)
        if (ws[i]) return 0;
    return 1;
}

#endif
