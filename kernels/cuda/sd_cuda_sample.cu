/* sd_cuda_sample.cu — GPU row processing and the on-device draft sampling step.
 *
 * sd_rule_process_kernel: grid (n_rows), 1024 threads; row r: logits -> probs with
 *   row_process_row (sd_cuda_sample_row.cuh), w scratch in ws row r (V doubles).
 * sd_rule_draft_kernel: grid (n_seq), 1024 threads; sequence b: processes its draft
 *   logit row into q (kept in q_out for the verifier), draws the Philox word of
 *   (seed[b], seq_id[b], position[b], DRAFT or SAMPLE) with cuRAND's device API, samples
 *   the token by exact fixed-point inverse CDF (or argmax in GREEDY), stores it where the
 *   next draft step reads its input, and optionally advances position[b]: no host
 *   round trip between draft steps; all per-sequence state is in device memory, so a
 *   captured graph replays correctly.
 * sd_rule_philox_kernel: test hook exposing cuRAND's Philox stream.
 * Shapes and the math are documented in sd_cuda_sample.h. */
#include <curand_kernel.h>
#include <limits.h>

#include "sd_cuda_common.cuh"
#include "sd_cuda_sample.h"
#include "sd_cuda_sample_row.cuh"

extern "C" {
#include "sd_rng.h"
}

static __global__ void __launch_bounds__(ROW_NT)
    sd_rule_process_kernel(const float *logits, int64_t ld_in, int V, sd_sampling_params sp, float *probs,
                           int64_t ld_out, int32_t *argmax_out, double *ws) {
    __shared__ RowShared sh;
    const int r = blockIdx.x;
    const int a = row_process_row(logits + (size_t)r * ld_in, V, sp, ws + (size_t)r * V, probs + (size_t)r * ld_out,
                                   sh);
    if (argmax_out && threadIdx.x == 0) argmax_out[r] = a;
}

static __global__ void __launch_bounds__(ROW_NT)
    sd_rule_draft_kernel(const float *logits, int64_t ld_logits, int V, sd_sampling_params sp, int mode,
                         const uint64_t *seed, const uint64_t *seq_id, int64_t *position, int advance,
                         const uint32_t *u_words, float *q_out, int64_t ld_q, int32_t *tok_out, int64_t tok_stride,
                         int32_t *tok_out2, int64_t tok2_stride, double *ws) {
    __shared__ RowShared sh;
    __shared__ uint32_t word;
    __shared__ int64_t pos;
    const int b = blockIdx.x;
    if (threadIdx.x == 0) {
        pos = position[b];
        if (u_words) {
            word = u_words[b];
        } else {
            const int purpose = (mode == SPECDEC_VERIFY_MATCH) ? SD_RNG_PURPOSE_SAMPLE : SD_RNG_PURPOSE_DRAFT;
            word = row_philox_word(seed[b], seq_id[b], pos, purpose);
        }
    }
    /* row_process_row starts with a block reduction (a barrier) before any use of word */
    float *q = q_out + (size_t)b * ld_q;
    const int am = row_process_row(logits + (size_t)b * ld_logits, V, sp, ws + (size_t)b * V, q, sh);
    int tok = am;
    if (mode != SPECDEC_VERIFY_GREEDY) tok = row_sample_row(q, V, word, sh);
    if (threadIdx.x == 0) {
        tok_out[(size_t)b * tok_stride] = tok;
        if (tok_out2) tok_out2[(size_t)b * tok2_stride] = tok;
        if (advance) position[b] = pos + 1;
    }
}

static __global__ void sd_rule_philox_kernel(const uint64_t *seed, const uint64_t *subseq, const uint64_t *offset,
                                             int n, int k, uint32_t *words, float *uf, double *ud) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n) return;
    curandStatePhilox4_32_10_t st;
    curand_init((unsigned long long)seed[j], (unsigned long long)subseq[j], (unsigned long long)offset[j], &st);
    for (int t = 0; t < k; t++) words[(size_t)j * k + t] = curand(&st);
    uf[j] = curand_uniform(&st);
    ud[j] = curand_uniform_double(&st);
}

/* --- launchers --------------------------------------------------------------------------- */
static size_t row_align256(size_t x) { return (x + 255) & ~(size_t)255; }

static specdec_status row_check_common(int32_t n_vocab, const sd_sampling_params *sp, sd_errbuf *eb) {
    if (n_vocab <= 0 || n_vocab > SD_CUDA_SAMPLE_MAX_VOCAB)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda spec: n_vocab %d outside [1, %d]", (int)n_vocab,
                       SD_CUDA_SAMPLE_MAX_VOCAB);
    return sd_sampling_check_params(sp, eb);
}

extern "C" size_t sd_cuda_sample_ws_bytes(int32_t n_rows, int32_t n_vocab) {
    if (n_rows <= 0 || n_vocab <= 0) return 0;
    return row_align256((size_t)n_rows * (size_t)n_vocab * sizeof(double));
}

extern "C" specdec_status sd_cuda_sample_process_rows(const float *logits, int64_t ld_in, int32_t n_rows,
                                                    int32_t n_vocab, const sd_sampling_params *sp, float *probs,
                                                    int64_t ld_out, int32_t *argmax_out, void *ws, size_t ws_bytes,
                                                    cudaStream_t stream, sd_errbuf *eb) {
    specdec_status st = row_check_common(n_vocab, sp, eb);
    if (st != SPECDEC_OK) return st;
    if (n_rows < 0 || n_rows > INT_MAX / 2)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda spec process: n_rows %d", (int)n_rows);
    if (n_rows == 0) return SPECDEC_OK;
    if (!logits || !probs || !ws)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda spec process: NULL logits, probs or workspace");
    if (ld_in < n_vocab || ld_out < n_vocab)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda spec process: row strides %lld/%lld < V=%d",
                       (long long)ld_in, (long long)ld_out, (int)n_vocab);
    if ((const void *)logits == (const void *)probs && ld_in != ld_out)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda spec process: in place needs equal strides");
    if (ws_bytes < sd_cuda_sample_ws_bytes(n_rows, n_vocab))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda spec process: workspace %zu bytes, %zu needed",
                       ws_bytes, sd_cuda_sample_ws_bytes(n_rows, n_vocab));
    sd_rule_process_kernel<<<(unsigned)n_rows, ROW_NT, 0, stream>>>(logits, ld_in, n_vocab, *sp, probs, ld_out,
                                                                      argmax_out, (double *)ws);
    SD_CUDA_LAUNCHED(eb, "sd_rule_process_kernel");
    return SPECDEC_OK;
}

extern "C" specdec_status sd_cuda_sample_draft_step(const float *logits, int64_t ld_logits, int32_t n_seq,
                                                  int32_t n_vocab, const sd_sampling_params *sp,
                                                  specdec_verify_mode mode, const uint64_t *seed,
                                                  const uint64_t *seq_id, int64_t *position, int advance_position,
                                                  const uint32_t *u_words, float *q_out, int64_t ld_q,
                                                  int32_t *tok_out, int64_t tok_stride, int32_t *tok_out2,
                                                  int64_t tok2_stride, void *ws, size_t ws_bytes, cudaStream_t stream,
                                                  sd_errbuf *eb) {
    specdec_status st = row_check_common(n_vocab, sp, eb);
    if (st != SPECDEC_OK) return st;
    if (mode != SPECDEC_VERIFY_REJECTION && mode != SPECDEC_VERIFY_GREEDY && mode != SPECDEC_VERIFY_MATCH)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda spec draft: mode %d is not REJECTION, GREEDY or MATCH",
                       (int)mode);
    if (n_seq < 0 || n_seq > INT_MAX / 2)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda spec draft: n_seq %d", (int)n_seq);
    if (n_seq == 0) return SPECDEC_OK;
    if (!logits || !q_out || !tok_out || !position || !ws || (!u_words && (!seed || !seq_id)))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT,
                       "cuda spec draft: NULL logits, q_out, tok_out, position, seed/seq_id or workspace");
    if ((ld_logits != 0 && ld_logits < n_vocab) || ld_q < n_vocab)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda spec draft: row strides %lld/%lld < V=%d",
                       (long long)ld_logits, (long long)ld_q, (int)n_vocab);
    if (ws_bytes < sd_cuda_sample_ws_bytes(n_seq, n_vocab))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda spec draft: workspace %zu bytes, %zu needed", ws_bytes,
                       sd_cuda_sample_ws_bytes(n_seq, n_vocab));
    sd_rule_draft_kernel<<<(unsigned)n_seq, ROW_NT, 0, stream>>>(
        logits, ld_logits, n_vocab, *sp, (int)mode, seed, seq_id, position, advance_position, u_words, q_out, ld_q,
        tok_out, tok_stride, tok_out2, tok2_stride, (double *)ws);
    SD_CUDA_LAUNCHED(eb, "sd_rule_draft_kernel");
    return SPECDEC_OK;
}

extern "C" specdec_status sd_cuda_sample_philox_words(const uint64_t *seed, const uint64_t *subseq,
                                                    const uint64_t *offset, int32_t n, int32_t k, uint32_t *words,
                                                    float *uf, double *ud, cudaStream_t stream, sd_errbuf *eb) {
    if (n < 0 || k < 0 || (n > 0 && (!seed || !subseq || !offset || !uf || !ud || (k > 0 && !words))))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "cuda spec philox: bad arguments (n %d, k %d)", (int)n,
                       (int)k);
    if (n == 0) return SPECDEC_OK;
    sd_rule_philox_kernel<<<(unsigned)((n + 127) / 128), 128, 0, stream>>>(seed, subseq, offset, n, k, words, uf, ud);
    SD_CUDA_LAUNCHED(eb, "sd_rule_philox_kernel");
    return SPECDEC_OK;
}
