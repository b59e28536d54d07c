/* sd_cuda_sample.h — C-callable launchers of the speculative-decoding kernels on the GPU:
 * logit-row processing (temperature / top-k / top-p / min-p, sd_cpu_sample.h steps 0-8),
 * the draft sampling step, and the fused verifier (rejection / greedy / match,
 * sd_cpu_verify.h). Implemented in sd_cuda_sample.cu and sd_cuda_verify.cu.
 *
 * Equality guarantee with the CPU reference (runtime/sd_sampling.c, sd_verify.c): BIT
 * FOR BIT. Same steps, same order, same tie rule (w descending, lower id first), and
 * the same math from kernels/sd_sample_rules.h on both sides: w_i = sd_rule_exp(z_i - m)
 * (the spec's own exp, explicit fma() only, so contraction cannot change it) and
 * exact fixed-point sums for the normaliser, the top-p mass, the inverse-CDF prefix and
 * the residual mass, hence independent of summation order and launch geometry. Given
 * the same logits (and uniforms / words) the processed rows, sampled tokens and
 * verifier decisions equal the CPU's exactly (tests/cuda_sample). Acceptance decisions
 * (u * q(x) <= p(x), one IEEE multiply in double) are identical given the same rows.
 *
 * Conventions: all pointers are device pointers unless stated; launchers enqueue on
 * `stream`, never synchronise, never allocate, check the launch and return a status
 * with sd_fail() detail (bad arguments: SPECDEC_ERR_INVALID_ARGUMENT, nothing
 * launched). Per-sequence seeds, sequence ids and positions live in device memory so
 * a captured CUDA graph replays with new values. Supported vocabulary: 1..262144.
 * Uniforms: the word of slot (seed, seq, position, purpose) is cuRAND's
 * curand(curand_init(seed, seq, sd_rng_offset(position, purpose))), the same 32 bits
 * as sd_rng_u32_at(); u = (word + 1) * 2^-32. Tests may inject words instead. */
#ifndef SD_CUDA_SPEC_H
#define SD_CUDA_SPEC_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "specdec.h"
#include "sd_error.h"
#include "sd_sample_rules.h"

#define SD_CUDA_SAMPLE_MAX_VOCAB 262144
#define SD_CUDA_SAMPLE_THREADS 1024

/* --- row processing ------------------------------------------------------------
 * probs[r] = sd_sampling_process(logits[r]) for r < n_rows (row r at logits + r*ld_in,
 * probs + r*ld_out; probs may alias logits when ld_in == ld_out). argmax_out (optional,
 * [n_rows]) gets the first index of the largest probability. ws: >=
 * sd_cuda_sample_ws_bytes(n_rows, V) bytes, 256-byte aligned. Grid: one
 * 1024-thread block per row. */
size_t sd_cuda_sample_ws_bytes(int32_t n_rows, int32_t n_vocab);
specdec_status sd_cuda_sample_process_rows(const float *logits, int64_t ld_in, int32_t n_rows, int32_t n_vocab,
                                         const sd_sampling_params *sp, float *probs, int64_t ld_out,
                                         int32_t *argmax_out, void *ws, size_t ws_bytes, cudaStream_t stream,
                                         sd_errbuf *eb);

/* --- one draft step for n_seq sequences --------------------------------------------
 * For sequence b: q = process(logits + b*ld_logits) (ld_logits 0: one row shared by all) written to q_out + b*ld_q (kept for
 * the verifier), then the draft token at absolute position position[b]:
 *   REJECTION: inverse CDF of q with the word of (seed[b], seq_id[b], position[b], DRAFT)
 *   MATCH:     the same with purpose SAMPLE (coupled with the target)
 *   GREEDY:    argmax of q
 * (= sd_verify_draft_sample). The token is stored at tok_out[b * tok_stride] (e.g. the
 * next draft step's input) and, when tok_out2 != NULL, at tok_out2[b * tok2_stride]
 * (e.g. the round's draft list). If advance_position != 0 the kernel then increments
 * position[b] so the next step (or graph replay) reads the next position.
 * u_words (optional, [n_seq]) replaces the Philox word (tests). ws: >=
 * sd_cuda_sample_ws_bytes(n_seq, V). Grid: one block per sequence. */
specdec_status sd_cuda_sample_draft_step(const float *logits, int64_t ld_logits, int32_t n_seq, int32_t n_vocab,
                                       const sd_sampling_params *sp, specdec_verify_mode mode,
                                       const uint64_t *seed, const uint64_t *seq_id, int64_t *position,
                                       int advance_position, const uint32_t *u_words, float *q_out, int64_t ld_q,
                                       int32_t *tok_out, int64_t tok_stride, int32_t *tok_out2,
                                       int64_t tok2_stride, void *ws, size_t ws_bytes, cudaStream_t stream,
                                       sd_errbuf *eb);

/* --- fused verifier ------------------------------------------------------------------
 * For each sequence b (round of length gamma starting at absolute position pos0[b]):
 *   p_i = process(target logits row i) for i = 0..gamma (rows at
 *         logits + b*logits_seq_stride + i*ld_logits), stored in the workspace;
 *   q_i = q + b*q_seq_stride + i*ld_q (the rows the draft tokens were sampled from;
 *         unused in GREEDY / MATCH, may be NULL there);
 *   draft tokens draft[b*draft_stride + i];
 * runs sd_verify's rule for `mode` and writes out_tokens[b*out_stride + 0..n] (the n
 * accepted drafts, then the emitted token) and out_n_accepted[b] = n. Uniforms: accept
 * word i = slot (pos0+i, ACCEPT), sample word i = slot (pos0+i, SAMPLE), or injected
 * u_accept[b*SPECDEC_MAX_DRAFT + i] / u_sample[b*(SPECDEC_MAX_DRAFT+1) + i].
 * A draft id outside [0, V) is rejected (never read through); an emitted id is always
 * in [0, V), also for NaN/Inf logits.
 * Grid (gamma+1, n_seq): one 1024-thread block per (row, sequence) processes its row and
 * computes that row's outcome (acceptance and the residual token if it rejects, the
 * target's token in GREEDY / MATCH, the bonus token on the last row); the last block of
 * a sequence to finish (atomic counter) applies the acceptance chain. ws: >=
 * sd_cuda_verify_ws_bytes(n_seq, gamma, V), zero-filled once before first use
 * (sd_cuda_verify_ws_init); the kernel leaves its counters at zero again, so the
 * launch can be captured in a graph and replayed. */
typedef struct sd_cuda_verify_args {
    specdec_verify_mode mode; /* REJECTION, GREEDY or MATCH */
    int32_t gamma;            /* 0..SPECDEC_MAX_DRAFT */
    int32_t n_vocab;
    int32_t n_seq;
    sd_sampling_params sp;
    const float *logits; /* target logits */
    int64_t ld_logits, logits_seq_stride;
    const float *q; /* draft rows */
    int64_t ld_q, q_seq_stride;
    const int32_t *draft;
    int64_t draft_stride;
    const uint64_t *seed;   /* [n_seq] */
    const uint64_t *seq_id; /* [n_seq] */
    const int64_t *pos0;    /* [n_seq] */
    const uint32_t *u_accept; /* optional injected words [n_seq][SPECDEC_MAX_DRAFT] */
    const uint32_t *u_sample; /* optional injected words [n_seq][SPECDEC_MAX_DRAFT + 1] */
    int32_t *out_tokens;
    int64_t out_stride;
    int32_t *out_n_accepted; /* [n_seq] */
} sd_cuda_verify_args;

size_t sd_cuda_verify_ws_bytes(int32_t n_seq, int32_t gamma, int32_t n_vocab);
specdec_status sd_cuda_verify_ws_init(void *ws, size_t ws_bytes, cudaStream_t stream, sd_errbuf *eb);
/* The processed target rows inside ws: p_i of sequence b at
 * ret + ((size_t)b * (gamma + 1) + i) * n_vocab (valid after the verify kernel ran). */
float *sd_cuda_verify_p_rows(void *ws, int32_t n_seq, int32_t gamma, int32_t n_vocab);
specdec_status sd_cuda_verify(const sd_cuda_verify_args *a, void *ws, size_t ws_bytes,
                                   cudaStream_t stream, sd_errbuf *eb);

/* --- test hook: cuRAND's Philox stream --------------------------------------------
 * For j < n: curand_init(seed[j], subseq[j], offset[j], &st); words[j*k + t] = the t-th
 * curand(&st) (t < k); then uf[j] = curand_uniform(&st), ud[j] = curand_uniform_double(&st)
 * (the words k and k+1 of the stream). */
specdec_status sd_cuda_sample_philox_words(const uint64_t *seed, const uint64_t *subseq, const uint64_t *offset,
                                         int32_t n, int32_t k, uint32_t *words, float *uf, double *ud,
                                         cudaStream_t stream, sd_errbuf *eb);

#ifdef __cplusplus
}
#endif

#endif
