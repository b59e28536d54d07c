/* sd_host_round.h — the host implementation of the round interface (core/sd_round.h):
 * any runners (CPU, CUDA with logits copied back, synthetic test models), the CPU
 * reference sampler and verifier (kernels/cpu). Buffers for one round of the largest
 * draft ((SPECDEC_MAX_DRAFT + 1) target rows and SPECDEC_MAX_DRAFT draft rows of V
 * floats, sampling scratch) are allocated in create; run() allocates nothing. */
#ifndef SD_HOST_ROUND_H
#define SD_HOST_ROUND_H

#include "sd_round.h"
#include "sd_runner.h"

/* target required, draft optional (NULL: plain steps only); both borrowed, same
 * vocabulary. On failure *out = NULL and the detail is in eb. */
specdec_status sd_host_round_create(sd_runner *target, sd_runner *draft, sd_round **out, sd_errbuf *eb);

#endif
