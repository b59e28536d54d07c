/* sd_host_round.h — the host implementation of the round interface (core/sd_round.h):
 * any runners (CPU, CUDA with logits copied back, synthetic test models), the CPU
 * reference sampler and verifier (kernels/cpu), chains and trees (docs/TREE.md).
 * Buffers for one round of the largest draft are allocated in create; run() allocates
 * nothing: with a draft, SD_RUNNER_TREE_MAX (65) target rows and 65 draft rows of V
 * floats (520 * V bytes: 2.1 MB at V = 4096, 17 MB at 32k, 79 MB at 151936, 133 MB at
 * 256000), the best-first candidate pool (~170 KB per tree slot) and sampling scratch;
 * without a draft, SPECDEC_MAX_DRAFT + 1 target rows. A shared round (many sequences)
 * has more rows (see sd_host_round_create_shared). */
#ifndef SD_HOST_ROUND_H
#define SD_HOST_ROUND_H

#include "sd_round.h"
#include "sd_runner.h"

/* Most sequences one run() of a shared round takes (core/sd_round.h). */
#define SD_HOST_MAX_SEQS SD_ROUND_MAX_SEQS

/* An engine's round: one sequence on these runners. target required, draft optional
 * (NULL: plain steps only); both borrowed, same vocabulary. On failure *out = NULL and
 * the detail is in eb. */
specdec_status sd_host_round_create(sd_runner *target, sd_runner *draft, sd_round **out, sd_errbuf *eb);

/* A shared round: up to max_seqs (1..SD_HOST_MAX_SEQS) sequences per run(), each
 * bringing its own runners (sd_round_seq.target / .draft, e.g. runners of one group
 * per model: core/sd_runner.h). Beyond one sequence's largest round the row buffers
 * grow with max_seqs up to 64 MB each; sequences that do not fit go in later waves
 * of the same run(). */
specdec_status sd_host_round_create_shared(int32_t n_vocab, int has_draft, int32_t max_seqs, sd_round **out,
                                           sd_errbuf *eb);

#endif
