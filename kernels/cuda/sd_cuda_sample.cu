/* sd_cuda_sample.cu — GPU row processing and the on-device draft sampling step.
 *
 * sd_rule_process_kernel: grid (n_rows), 1024 threads; row r: logits -> probs with
 *   row_process_row (sd_cuda_sample_row.cuh), w scratch in ws row r (V doubles).
 * sd_rule_draft_kernel: grid (n_seq), 1024 threads; sequence b: processes its draft
 *   logit row into q (kept in q_out for the verifier), draws the Philox word of
 *   (seed[b], seq_id[b], position[b], sd_rule_draft_purpose(mode)) with cuRAND's
 *   device API (none in GREEDY), samples the token by exact fixed-point inverse CDF (or
 *   argmax in GREEDY), stores it where the next draft step reads its input, and
 *   optionally advances position[b]: no host
 *   round trip between draft steps; all per-sequence state is in device memory, so a
 *   captured graph replays correctly.
 * sd_rule_philox_kernel: test hook exposing cuRAND's Philox stream.
 * Each kernel takes its launcher's argument struct by value. Shapes and the math are
 * documented in sd_cuda_sample.h. */
#include <curand_kernel.h>
#include <limits.h>

#include "sd_cuda_common.cuh"
#include "sd_cuda_sample.h"
#include "sd_cuda_sample_row.cuh"
#include "sd_cuda_verify_mb.h"

extern "C" {
#include "sd_rng.h"
}

static __global__ void __launch_bounds__(ROW_NT) sd_rule_process_kernel(sd_cuda_sample_rows_args a, double *ws) {
    __shared__ RowShared sh;
    const int r = blockIdx.x, V = a.n_vocab;
    const int am = row_process_row(a.logits + (size_t)r * a.ld_in, V, a.sp, ws + (size_t)r * V,
                                   a.probs + (size_t)r * a.ld_out, sh);
    if (a.argmax_out && threadIdx.x == 0) a.argmax_out[r] = am;
}

static __global__ void __launch_bounds__(ROW_NT) sd_rule_draft_kernel(sd_cuda_sample_draft_args a, double *ws) {
    __shared__ RowShared sh;
    __shared__ uint32_t word;
    __shared__ int64_t pos;
    const int b = blockIdx.x, V = a.n_vocab;
    const int purpose = sd_rule_draft_purpose(a.mode); /* -1 (GREEDY): no uniform */
    if (threadIdx.x == 0) {
        pos = a.position[b];
        if (a.u_words) word = a.u_words[b];
        else word = purpose >= 0 ? row_philox_word(a.seed[b], a.seq_id[b], pos, purpose) : 0u;
    }
    /* row_process_row starts with a block reduction (a barrier) before any use of word */
    float *q = a.q_out + (size_t)b * a.ld_q;
    const int am = row_process_row(a.logits + (size_t)b * a.ld_logits, V, a.sp, ws + (size_t)b * V, q, sh);
    int tok = am;
    if (purpose >= 0) tok = row_sample_row(q, V, word, sh);
    if (threadIdx.x == 0) {
        a.tok_out[(size_t)b * a.tok_stride] = tok;
        if (a.tok_out2) a.tok_out2[(size_t)b * a.tok2_stride] = tok;
        if (a.advance_position) a.position[b] = pos + 1;
    }
}

static __global__ void sd_rule_philox_kernel(sd_cuda_sample_philox_args a) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= a.n) return;
    curandStatePhilox4_32_10_t st;
    curand_init((unsigned long long)a.seed[j], (unsigned long long)a.subseq[j], (unsigned long long)a.offset[j], &st);
    for (int t = 0; t < a.k; t++) a.words[(size_t)j * a.k + t] = curand(&st);
    a.uf[j] = curand_uniform(&st);
    a.ud[j] = curand_uniform_double(&st);
}

/* --- launchers --------------------------------------------------------------------------- */

static specdec_status row_check_common(int32_t n_vocab, const sd_sampling_params *sp, sd_errbuf *eb) {
    if (n_vocab <= 0 || n_vocab > SD_CUDA_SAMPLE_MAX_VOCAB)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda sample: n_vocab %d outside [1, %d]", (int)n_vocab,
                       SD_CUDA_SAMPLE_MAX_VOCAB);
    return sd_sampling_check_params(sp, eb);
}

/* Workspace layout: sd_draft_ws_layout (sd_cuda_mb.h): the control header, the
 * one-block kernels' w rows, the multi-block region of the draft step. */
extern "C" size_t sd_cuda_sample_ws_bytes(int32_t n_rows, int32_t n_vocab) {
    return sd_draft_ws_layout(n_rows, n_vocab).total;
}

static double *row_ws_w(void *ws, int32_t n_rows, int32_t n_vocab) {
    return (double *)((char *)ws + sd_draft_ws_layout(n_rows, n_vocab).w);
}

extern "C" specdec_status sd_cuda_sample_ws_init(void *ws, size_t ws_bytes, cudaStream_t stream, sd_errbuf *eb) {
    if (!ws) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda sample: NULL workspace");
    SD_CUDA_TRY(eb, cudaMemsetAsync(ws, 0, ws_bytes, stream));
    return SPECDEC_OK;
}

extern "C" specdec_status sd_cuda_sample_process_rows(const sd_cuda_sample_rows_args *a, void *ws, size_t ws_bytes,
                                                      cudaStream_t stream, sd_errbuf *eb) {
    if (!a) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda sample process: NULL args");
    specdec_status st = row_check_common(a->n_vocab, &a->sp, eb);
    if (st != SPECDEC_OK) return st;
    if (a->n_rows < 0 || a->n_rows > INT_MAX / 2)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda sample process: n_rows %d", (int)a->n_rows);
    if (a->n_rows == 0) return SPECDEC_OK;
    if (!a->logits || !a->probs || !ws)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda sample process: NULL logits, probs or workspace");
    if (a->ld_in < a->n_vocab || a->ld_out < a->n_vocab)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda sample process: row strides %lld/%lld < V=%d",
                       (long long)a->ld_in, (long long)a->ld_out, (int)a->n_vocab);
    if ((const void *)a->logits == (const void *)a->probs && a->ld_in != a->ld_out)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda sample process: in place needs equal strides");
    if (ws_bytes < sd_cuda_sample_ws_bytes(a->n_rows, a->n_vocab))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda sample process: workspace %zu bytes, %zu needed",
                       ws_bytes, sd_cuda_sample_ws_bytes(a->n_rows, a->n_vocab));
    sd_rule_process_kernel<<<(unsigned)a->n_rows, ROW_NT, 0, stream>>>(*a, row_ws_w(ws, a->n_rows, a->n_vocab));
    SD_CUDA_LAUNCHED(eb, "sd_rule_process_kernel");
    return SPECDEC_OK;
}

extern "C" specdec_status sd_cuda_sample_draft_step(const sd_cuda_sample_draft_args *a, void *ws, size_t ws_bytes,
                                                    cudaStream_t stream, sd_errbuf *eb) {
    if (!a) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda sample draft: NULL args");
    specdec_status st = row_check_common(a->n_vocab, &a->sp, eb);
    if (st != SPECDEC_OK) return st;
    if (a->mode != SPECDEC_VERIFY_REJECTION && a->mode != SPECDEC_VERIFY_GREEDY && a->mode != SPECDEC_VERIFY_MATCH)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT,
                       "cuda sample draft: mode %d is not REJECTION, GREEDY or MATCH", (int)a->mode);
    if (a->n_seq < 0 || a->n_seq > INT_MAX / 2)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda sample draft: n_seq %d", (int)a->n_seq);
    if (a->n_seq == 0) return SPECDEC_OK;
    if (!a->logits || !a->q_out || !a->tok_out || !a->position || !ws || (!a->u_words && (!a->seed || !a->seq_id)))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT,
                       "cuda sample draft: NULL logits, q_out, tok_out, position, seed/seq_id or workspace");
    if ((a->ld_logits != 0 && a->ld_logits < a->n_vocab) || a->ld_q < a->n_vocab)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda sample draft: row strides %lld/%lld < V=%d",
                       (long long)a->ld_logits, (long long)a->ld_q, (int)a->n_vocab);
    if (ws_bytes < sd_cuda_sample_ws_bytes(a->n_seq, a->n_vocab))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda sample draft: workspace %zu bytes, %zu needed",
                       ws_bytes, sd_cuda_sample_ws_bytes(a->n_seq, a->n_vocab));
    if (a->blocks_per_row != 0) {
        const sd_draft_layout L = sd_draft_ws_layout(a->n_seq, a->n_vocab);
        char *base = (char *)ws;
        const sd_cuda_mb_ws w = {(sd_mb_ctrl *)(base + L.mb_ctrl), L.mb_parts ? (sd_mb_part *)(base + L.mb_parts) : NULL,
                                 L.mb_hist ? (sd_mb_hist *)(base + L.mb_hist) : NULL, NULL, NULL};
        int launched = 0;
        st = sd_cuda_draft_mb_launch(a, &w, stream, &launched, eb);
        if (st != SPECDEC_OK || launched) return st;
    }
    sd_rule_draft_kernel<<<(unsigned)a->n_seq, ROW_NT, 0, stream>>>(*a, row_ws_w(ws, a->n_seq, a->n_vocab));
    SD_CUDA_LAUNCHED(eb, "sd_rule_draft_kernel");
    return SPECDEC_OK;
}

extern "C" specdec_status sd_cuda_sample_philox_words(const sd_cuda_sample_philox_args *a, cudaStream_t stream,
                                                      sd_errbuf *eb) {
    if (!a || a->n < 0 || a->k < 0 ||
        (a->n > 0 && (!a->seed || !a->subseq || !a->offset || !a->uf || !a->ud || (a->k > 0 && !a->words))))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda sample philox: bad arguments (n %d, k %d)",
                       a ? (int)a->n : -1, a ? (int)a->k : -1);
    if (a->n == 0) return SPECDEC_OK;
    sd_rule_philox_kernel<<<(unsigned)((a->n + 127) / 128), 128, 0, stream>>>(*a);
    SD_CUDA_LAUNCHED(eb, "sd_rule_philox_kernel");
    return SPECDEC_OK;
}
