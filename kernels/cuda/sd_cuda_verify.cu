/* sd_cuda_verify.cu — the fused speculative verifier (sd_cpu_verify.h on the GPU).
 *
 * One launch, grid (gamma + 1, n_seq), 1024 threads per block. Block (r, b):
 *  1. p_r = row_process_row(target logits row r of sequence b) -> ws (float row, and
 *     the double w row it is computed from);
 *  2. the row's outcome, which depends on row r only:
 *     GREEDY: t_r = argmax p_r;  MATCH: t_r = inverse CDF of p_r with the SAMPLE word;
 *     REJECTION, r < gamma: acc_r = sd_rule_accept(u_acc, p_r(x), q_r(x)) (q_r(x) = 1 and
 *       the residual p_r without x for deterministic drafts; p_r(x) > 0 and
 *       u_acc * q_r(x) <= p_r(x) in double; x = draft[r], an id outside [0, V) is
 *       rejected without being read through), and
 *       only if rejected the residual token of norm(max(0, p_r - q_r)) with the SAMPLE
 *       word (p_r itself if the residual is empty);
 *     REJECTION, r == gamma: the bonus token, inverse CDF of p_gamma;
 *  3. the outcome goes to ws, __threadfence, atomicAdd on the sequence's counter; the
 *     block that brings it to gamma + 1 (the last one) applies the chain: n = first
 *     rejected / mismatching row (gamma if none), emitted token = outcome of row n, and
 *     resets the counter to 0 (graph replays start clean).
 * Rows are processed by separate blocks because one SM cannot stream (gamma+1) * V
 * floats within the latency budget; the chain itself is O(gamma) in one block per
 * sequence. Uniform words come from cuRAND's Philox (curand_init(seed, seq,
 * sd_rng_offset(pos0 + r, purpose))) or from injected arrays. */
#include <curand_kernel.h>
#include <limits.h>

#include "sd_cuda_common.cuh"
#include "sd_cuda_sample.h"
#include "sd_cuda_sample_row.cuh"
#include "sd_cuda_verify_mb.h"

extern "C" {
#include "sd_rng.h"
}

#define ROW_ROWS_MAX (SPECDEC_MAX_DRAFT + 1)

/* Workspace layout: sd_verify_ws_layout (sd_cuda_mb.h). The per-sequence counters sit
 * in the control header at offsets fixed per sequence; the kernel leaves them at zero. */

static __global__ void __launch_bounds__(ROW_NT) sd_rule_verify_kernel(sd_cuda_verify_args a,
                                                                        uint32_t *counters, int32_t *outcomes,
                                                                        float *prows, double *wrows) {
    __shared__ RowShared sh;
    __shared__ uint32_t w_sample, w_accept;
    __shared__ int is_last;
    const int r = blockIdx.x, b = blockIdx.y;
    const int g = a.gamma, V = a.n_vocab;
    const size_t row = (size_t)b * (size_t)(g + 1) + (size_t)r;
    float *p = prows + row * (size_t)V;
    const float *lrow = a.logits + (size_t)b * a.logits_seq_stride + (size_t)r * a.ld_logits;
    if (threadIdx.x == 0) {
        const int64_t pos = a.pos0[b] + r;
        if (a.u_sample) w_sample = a.u_sample[(size_t)b * (SPECDEC_MAX_DRAFT + 1) + r];
        else if (a.mode != SPECDEC_VERIFY_GREEDY)
            w_sample = row_philox_word(a.seed[b], a.seq_id[b], pos, SD_RNG_PURPOSE_SAMPLE);
        else w_sample = 0;
        w_accept = 0;
        if (a.mode == SPECDEC_VERIFY_REJECTION && r < g) {
            if (a.u_accept) w_accept = a.u_accept[(size_t)b * SPECDEC_MAX_DRAFT + r];
            else w_accept = row_philox_word(a.seed[b], a.seq_id[b], pos, SD_RNG_PURPOSE_ACCEPT);
        }
    }
    /* row_process_row begins with a block reduction: the words are visible after it */
    const int am = row_process_row(lrow, V, a.sp, wrows + row * (size_t)V, p, sh);

    int tok = 0, acc = 0;
    if (a.mode == SPECDEC_VERIFY_GREEDY) {
        tok = am;
    } else if (a.mode == SPECDEC_VERIFY_MATCH || r == g) {
        tok = row_sample_row(p, V, w_sample, sh);
    } else {
        const int x = a.draft[(size_t)b * a.draft_stride + r];
        if (a.deterministic) { /* q one-hot on x (docs/DRAFTERS.md) */
            if (x >= 0 && x < V) acc = sd_rule_accept(sd_rule_word_to_u(w_accept), p[x], 1.0f);
            if (!acc) tok = row_sample_residual_det(p, x, V, w_sample, sh);
        } else {
            const float *q = a.q + (size_t)b * a.q_seq_stride + (size_t)r * a.ld_q;
            if (x >= 0 && x < V) acc = sd_rule_accept(sd_rule_word_to_u(w_accept), p[x], q[x]);
            if (!acc) tok = row_sample_residual(p, q, V, w_sample, sh);
        }
    }

    if (threadIdx.x == 0) {
        int32_t *o = outcomes + ((size_t)b * ROW_ROWS_MAX + r) * 2;
        o[0] = tok;
        o[1] = acc;
        __threadfence();
        const uint32_t prev = atomicAdd(&counters[b], 1u);
        is_last = (prev == (uint32_t)g);
    }
    __syncthreads();
    if (is_last && threadIdx.x == 0) {
        __threadfence();
        const volatile int32_t *oc = outcomes + (size_t)b * ROW_ROWS_MAX * 2;
        const int32_t *draft = a.draft + (size_t)b * a.draft_stride;
        int n = 0;
        if (a.mode == SPECDEC_VERIFY_REJECTION) {
            while (n < g && oc[2 * n + 1]) n++;
        } else {
            while (n < g && draft[n] == oc[2 * n]) n++;
        }
        int32_t *out = a.out_tokens + (size_t)b * a.out_stride;
        for (int i = 0; i < n; i++) out[i] = draft[i];
        out[n] = oc[2 * n];
        a.out_n_accepted[b] = n;
        counters[b] = 0;
    }
}

extern "C" size_t sd_cuda_verify_ws_bytes(int32_t n_seq, int32_t gamma, int32_t n_vocab) {
    return sd_verify_ws_layout(n_seq, gamma, n_vocab).total;
}

extern "C" specdec_status sd_cuda_verify_ws_init(void *ws, size_t ws_bytes, cudaStream_t stream,
                                                      sd_errbuf *eb) {
    if (!ws) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda verify: NULL workspace");
    SD_CUDA_TRY(eb, cudaMemsetAsync(ws, 0, ws_bytes, stream));
    return SPECDEC_OK;
}

extern "C" float *sd_cuda_verify_p_rows(void *ws, int32_t n_seq, int32_t gamma, int32_t n_vocab) {
    const sd_verify_layout L = sd_verify_ws_layout(n_seq, gamma, n_vocab);
    if (!ws || L.total == 0) return NULL;
    return (float *)((char *)ws + L.p);
}

extern "C" specdec_status sd_cuda_verify(const sd_cuda_verify_args *a, void *ws, size_t ws_bytes,
                                              cudaStream_t stream, sd_errbuf *eb) {
    if (!a) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda verify: NULL args");
    if (a->mode != SPECDEC_VERIFY_REJECTION && a->mode != SPECDEC_VERIFY_GREEDY && a->mode != SPECDEC_VERIFY_MATCH)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda verify: mode %d is not REJECTION, GREEDY or MATCH",
                       (int)a->mode);
    if (a->gamma < 0 || a->gamma > SPECDEC_MAX_DRAFT)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda verify: gamma %d outside [0, %d]", (int)a->gamma,
                       SPECDEC_MAX_DRAFT);
    if (a->n_vocab <= 0 || a->n_vocab > SD_CUDA_SAMPLE_MAX_VOCAB)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda verify: n_vocab %d outside [1, %d]",
                       (int)a->n_vocab, SD_CUDA_SAMPLE_MAX_VOCAB);
    specdec_status st = sd_sampling_check_params(&a->sp, eb);
    if (st != SPECDEC_OK) return st;
    if (a->n_seq < 0 || a->n_seq > SD_CUDA_VERIFY_MAX_SEQ)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda verify: n_seq %d outside [0, %d]", (int)a->n_seq,
                       SD_CUDA_VERIFY_MAX_SEQ);
    if (a->n_seq == 0) return SPECDEC_OK;
    if (!a->logits || !a->out_tokens || !a->out_n_accepted || !a->pos0 || !ws || (a->gamma > 0 && !a->draft))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT,
                       "cuda verify: NULL logits, draft, pos0, output pointer or workspace");
    if (a->mode == SPECDEC_VERIFY_REJECTION && a->gamma > 0 && !a->q && !a->deterministic)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda verify: rejection mode needs the draft's q rows");
    const int need_words = a->mode != SPECDEC_VERIFY_GREEDY;
    if (need_words && (!a->u_sample || (a->mode == SPECDEC_VERIFY_REJECTION && a->gamma > 0 && !a->u_accept)) &&
        (!a->seed || !a->seq_id))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda verify: no seeds / sequence ids and no injected words");
    if (a->ld_logits < a->n_vocab || (a->gamma > 0 && a->q && !a->deterministic && a->ld_q < a->n_vocab) || a->out_stride < a->gamma + 1 ||
        (a->gamma > 0 && a->draft_stride < a->gamma))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT,
                       "cuda verify: strides too small (ld_logits %lld, ld_q %lld, out %lld, draft %lld; V=%d, "
                       "gamma=%d)",
                       (long long)a->ld_logits, (long long)a->ld_q, (long long)a->out_stride,
                       (long long)a->draft_stride, (int)a->n_vocab, (int)a->gamma);
    const size_t need = sd_cuda_verify_ws_bytes(a->n_seq, a->gamma, a->n_vocab);
    if (ws_bytes < need)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda verify: workspace %zu bytes, %zu needed", ws_bytes,
                       need);
    char *base = (char *)ws;
    const sd_verify_layout L = sd_verify_ws_layout(a->n_seq, a->gamma, a->n_vocab);
    if (a->blocks_per_row != 0 && !a->deterministic) { /* deterministic drafts: the one-block kernel */
        const sd_cuda_mb_ws w = {(sd_mb_ctrl *)(base + L.mb_ctrl), L.mb_parts ? (sd_mb_part *)(base + L.mb_parts) : NULL,
                                 L.mb_hist ? (sd_mb_hist *)(base + L.mb_hist) : NULL, (int32_t *)(base + L.outcomes),
                                 (float *)(base + L.p)};
        int launched = 0;
        st = sd_cuda_verify_mb_launch(a, &w, stream, &launched, eb);
        if (st != SPECDEC_OK || launched) return st;
    }
    dim3 grid((unsigned)(a->gamma + 1), (unsigned)a->n_seq);
    sd_rule_verify_kernel<<<grid, ROW_NT, 0, stream>>>(*a, (uint32_t *)(base + L.counters), (int32_t *)(base + L.outcomes),
                                                        (float *)(base + L.p), (double *)(base + L.w));
    SD_CUDA_LAUNCHED(eb, "sd_rule_verify_kernel");
    return SPECDEC_OK;
}
