/* sd_host_round.h — the host implementation of the round interface (core/sd_round.h):
 * any runners (CPU, CUDA with logits copied back, synthetic test models), the CPU
 * reference sampler and verifier (kernels/cpu), chains and trees (docs/TREE.md).
 * Buffers for one round of the largest draft are allocated in create; run() allocates
 * nothing: with a draft, SD_RUNNER_TREE_MAX (65) target rows and 65 draft rows of V
 * floats (520 * V bytes: 2.1 MB at V = 4096, 17 MB at 32k, 79 MB at 151936, 133 MB at
 * 256000), the best-first candidate pool (~170 KB) and sampling scratch; without a
 * draft, SPECDEC_MAX_DRAFT + 1 target rows. */
#ifndef SD_HOST_ROUND_H
#define SD_HOST_ROUND_H

#include "sd_round.h"
#include "sd_runner.h"

/* target required, draft optional (NULL: plain steps only); both borrowed, same
 * vocabulary. On failure *out = NULL and the detail is in eb. */
specdec_status sd_host_round_create(sd_runner *target, sd_runner *draft, sd_round **out, sd_errbuf *eb);

#endif
