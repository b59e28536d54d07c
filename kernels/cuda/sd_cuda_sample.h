/* sd_cuda_sample.h — C-callable launchers of the speculative-decoding kernels on the GPU:
 * logit-row processing (temperature / top-k / top-p / min-p, sd_cpu_sample.h steps 0-8),
 * the draft sampling step, and the fused verifier (rejection / greedy / match,
 * sd_cpu_verify.h). Implemented in sd_cuda_sample.cu and sd_cuda_verify.cu.
 *
 * Equality guarantee with the CPU reference (kernels/cpu/sd_cpu_sample.c,
 * sd_cpu_verify.c): BIT FOR BIT. Same steps, same order, and every per-element decision
 * is a function of core/sd_sample_rules.h called by both sides: the argmax rule, the
 * weights w_i = sd_rule_weight (the spec's own exp, explicit fma() only, so contraction
 * cannot change it), the rank order (w descending, lower id first), the filters, the
 * fixed-point masses, acceptance (sd_rule_accept: u * q(x) <= p(x), one IEEE multiply
 * in double), and exact fixed-point sums for the normaliser, the top-p mass, the
 * inverse-CDF prefix and the residual mass, hence independent of summation order and
 * launch geometry. Given the same logits (and uniforms / words) the processed rows,
 * sampled tokens and verifier decisions equal the CPU's exactly (tests/cuda_sample).
 *
 * Conventions: all pointers are device pointers unless stated; launchers enqueue on
 * `stream`, never synchronise, never allocate, check the launch and return a status
 * with sd_fail() detail (bad arguments: SPECDEC_ERR_INVALID_ARGUMENT, nothing
 * launched). Per-sequence seeds, sequence ids and positions live in device memory so
 * a captured CUDA graph replays with new values. Supported vocabulary: 1..262144.
 * Uniforms: the word of slot (seed, seq, position, purpose) is cuRAND's
 * curand(curand_init(seed, seq, sd_rng_offset(position, purpose))), the same 32 bits
 * as sd_rng_u32_at(); u = (word + 1) * 2^-32. Tests may inject words instead. */
#ifndef SD_CUDA_SAMPLE_H
#define SD_CUDA_SAMPLE_H

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
 * probs[r] = sd_sampling_process(logits[r]) for r < n_rows. Grid: one 1024-thread
 * block per row. */
typedef struct sd_cuda_sample_rows_args {
    const float *logits;  /* row r at logits + r * ld_in */
    int64_t ld_in;        /* >= n_vocab */
    int32_t n_rows;       /* >= 0 (0: nothing launched) */
    int32_t n_vocab;      /* 1..SD_CUDA_SAMPLE_MAX_VOCAB */
    sd_sampling_params sp;
    float *probs;         /* row r at probs + r * ld_out; may alias logits when ld_in == ld_out */
    int64_t ld_out;       /* >= n_vocab */
    int32_t *argmax_out;  /* optional [n_rows]: first index of the largest probability */
} sd_cuda_sample_rows_args;

/* ws: >= sd_cuda_sample_ws_bytes(n_rows, V) bytes, 256-byte aligned. */
size_t sd_cuda_sample_ws_bytes(int32_t n_rows, int32_t n_vocab);
specdec_status sd_cuda_sample_process_rows(const sd_cuda_sample_rows_args *a, void *ws, size_t ws_bytes,
                                           cudaStream_t stream, sd_errbuf *eb);

/* --- one draft step for n_seq sequences --------------------------------------------
 * For sequence b: q = process(logits + b*ld_logits) written to q_out + b*ld_q (kept for
 * the verifier), then the draft token at absolute position position[b]
 * (= sd_verify_draft_sample; the slot's purpose is sd_rule_draft_purpose(mode)):
 *   REJECTION: inverse CDF of q with the word of (seed[b], seq_id[b], position[b], DRAFT)
 *   MATCH:     the same with purpose SAMPLE (coupled with the target)
 *   GREEDY:    argmax of q
 * The token is stored at tok_out[b * tok_stride] (e.g. the next draft step's input)
 * and, when tok_out2 != NULL, at tok_out2[b * tok2_stride] (e.g. the round's draft
 * list). If advance_position != 0 the kernel then increments position[b] so the next
 * step (or graph replay) reads the next position. ws: >= sd_cuda_sample_ws_bytes(n_seq,
 * V). Grid: one block per sequence. */
typedef struct sd_cuda_sample_draft_args {
    const float *logits;    /* draft logits, sequence b at logits + b * ld_logits */
    int64_t ld_logits;      /* 0: one row shared by all sequences; else >= n_vocab */
    int32_t n_seq;          /* >= 0 (0: nothing launched) */
    int32_t n_vocab;        /* 1..SD_CUDA_SAMPLE_MAX_VOCAB */
    sd_sampling_params sp;
    specdec_verify_mode mode; /* REJECTION, GREEDY or MATCH */
    const uint64_t *seed;   /* [n_seq] (unused with u_words) */
    const uint64_t *seq_id; /* [n_seq] (unused with u_words) */
    int64_t *position;      /* [n_seq] absolute positions of the tokens drawn */
    int advance_position;   /* != 0: position[b] += 1 after the draw */
    const uint32_t *u_words; /* optional [n_seq]: Philox words to use instead (tests) */
    float *q_out;           /* sequence b's processed row at q_out + b * ld_q */
    int64_t ld_q;           /* >= n_vocab */
    int32_t *tok_out;       /* token of sequence b at tok_out[b * tok_stride] */
    int64_t tok_stride;
    int32_t *tok_out2;      /* optional second copy at tok_out2[b * tok2_stride] */
    int64_t tok2_stride;
    int32_t blocks_per_row; /* 0: one block per sequence; SD_CUDA_MB_AUTO or 1..64: multi-block (below) */
} sd_cuda_sample_draft_args;

specdec_status sd_cuda_sample_draft_step(const sd_cuda_sample_draft_args *a, void *ws, size_t ws_bytes,
                                         cudaStream_t stream, sd_errbuf *eb);

/* Multi-block variants (sd_cuda_verify_mb.cu, plan in sd_cuda_mb.h): blocks_per_row != 0
 * in the draft / verify arguments splits every row over that many 512-thread blocks
 * (SD_CUDA_MB_AUTO: as many as are resident at once, up to 64; the one-block kernel
 * when V / rows do not fit: chunks of at most 4096 entries, <= 64 rows per launch).
 * Same results bit for bit as the one-block kernels (and the CPU). The workspace must be
 * zero-filled once before the first use (sd_cuda_sample_ws_init / sd_cuda_verify_ws_init):
 * the barrier records sit in its control header at offsets fixed per row, whatever the
 * launch shape, and the kernels leave them zeroed again (sd_cuda_mb.h "workspace
 * layouts"), so one workspace serves launches of ANY shapes that fit it, in any order,
 * and graphs replay. AUTO falls back to the one-block kernel whenever the multi-block
 * one cannot run here (sd_mb_plan_blocks: no block count fits, no cooperative launch,
 * too little shared memory; or the driver refuses the cooperative launch). An explicit
 * count that cannot run: SPECDEC_ERR_UNSUPPORTED. */
#define SD_CUDA_MB_AUTO (-1)
specdec_status sd_cuda_sample_ws_init(void *ws, size_t ws_bytes, cudaStream_t stream, sd_errbuf *eb);

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
 * launch can be captured in a graph and replayed. "Once" holds for every launch shape:
 * the per-sequence counters live in the workspace's control header at offsets fixed per
 * sequence (sd_cuda_mb.h "workspace layouts"), so launches of different (n_seq, gamma)
 * may share one workspace sized for the largest, in any order, with no clearing. */
typedef struct sd_cuda_verify_args {
    specdec_verify_mode mode;  /* REJECTION, GREEDY or MATCH */
    int32_t gamma;             /* draft tokens per sequence, 0..SPECDEC_MAX_DRAFT */
    int32_t n_vocab;           /* 1..SD_CUDA_SAMPLE_MAX_VOCAB */
    int32_t n_seq;             /* 0..SD_CUDA_VERIFY_MAX_SEQ = 65535 (0: nothing launched) */
    sd_sampling_params sp;     /* applied to the target rows (GREEDY: the neutral ones) */
    const float *logits;       /* target logits, row i of sequence b at b*logits_seq_stride + i*ld_logits */
    int64_t ld_logits;         /* >= n_vocab */
    int64_t logits_seq_stride;
    const float *q;            /* draft rows (REJECTION with gamma > 0), row i of b at b*q_seq_stride + i*ld_q */
    int64_t ld_q;              /* >= n_vocab when q is used */
    int64_t q_seq_stride;
    const int32_t *draft;      /* draft token i of b at draft[b*draft_stride + i] (gamma > 0) */
    int64_t draft_stride;      /* >= gamma */
    const uint64_t *seed;      /* [n_seq] (unused with injected words) */
    const uint64_t *seq_id;    /* [n_seq] (unused with injected words) */
    const int64_t *pos0;       /* [n_seq] absolute position of each sequence's first draft token */
    const uint32_t *u_accept;  /* optional injected words [n_seq][SPECDEC_MAX_DRAFT] */
    const uint32_t *u_sample;  /* optional injected words [n_seq][SPECDEC_MAX_DRAFT + 1] */
    int32_t *out_tokens;       /* sequence b's n + 1 tokens at out_tokens + b*out_stride */
    int64_t out_stride;        /* >= gamma + 1 */
    int32_t *out_n_accepted;   /* [n_seq] */
    int32_t blocks_per_row;    /* 0: one block per row; SD_CUDA_MB_AUTO or 1..64: multi-block (above) */
    int32_t deterministic;     /* 1: deterministic drafts (docs/DRAFTERS.md): q_i is one-hot on draft
                                  token i, q is not read (may be NULL); REJECTION accepts with p(x)
                                  and resamples from p without x (sd_verify_det's rules); always
                                  the one-block kernel */
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
typedef struct sd_cuda_sample_philox_args {
    const uint64_t *seed, *subseq, *offset; /* [n] */
    int32_t n;                              /* >= 0 */
    int32_t k;                              /* words per stream, >= 0 */
    uint32_t *words;                        /* [n][k] (may be NULL when k == 0) */
    float *uf;                              /* [n] */
    double *ud;                             /* [n] */
} sd_cuda_sample_philox_args;

specdec_status sd_cuda_sample_philox_words(const sd_cuda_sample_philox_args *a, cudaStream_t stream, sd_errbuf *eb);

#ifdef __cplusplus
}
#endif

#endif
