/* sd_host_round.h — the HOST EXECUTOR of the round protocol (core/sd_round.h): any
 * runners (CPU, CUDA with logits copied back, synthetic test models), the CPU reference
 * sampler and verifier (kernels/cpu), chains and trees (docs/TREE.md), dense q rows and
 * deterministic drafts. Buffers for one round of the largest proposal are allocated in
 * create; its stages allocate nothing: SD_RUNNER_TREE_MAX (65) target rows of V floats
 * and, for runner drafters (has_draft), 65 q rows (520 * V bytes with a draft, 260 * V
 * without: 2.1 / 1.1 MB at V = 4096, 79 / 40 MB at 151936), the best-first candidate
 * pool (~170 KB per tree slot) and sampling scratch. More sequences per run() (max_seqs
 * > 1) have more rows, up to 64 MB per buffer; sequences that do not fit go in later
 * waves of the same run(). */
#ifndef SD_HOST_ROUND_H
#define SD_HOST_ROUND_H

#include "sd_round.h"
#include "sd_runner.h"

/* Most sequences one wave takes (core/sd_round.h). */
#define SD_HOST_MAX_SEQS SD_ROUND_MAX_SEQS

/* The host executor for up to max_seqs (1..SD_HOST_MAX_SEQS) sequences per wave of
 * vocabulary n_vocab; has_draft: runner drafters (a draft model) may come (q rows and
 * tree pools). On failure *out = NULL and the detail is in eb. */
specdec_status sd_host_exec_create(int32_t n_vocab, int has_draft, int32_t max_seqs, sd_exec **out, sd_errbuf *eb);

#endif
