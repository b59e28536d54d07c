/* sd_logprob.h — one emitted token's log-probability record (docs/LOGPROBS.md): what an
 * executor computes from the TARGET's raw logits row of the token's position
 * (kernels/cpu/sd_cpu_logprobs.c) and the generation loop hands to the caller as a
 * specdec_token_logprobs (include/specdec.h). Fixed size: no allocation per token. */
#ifndef SD_LOGPROB_H
#define SD_LOGPROB_H

#include <stdint.h>

#include "specdec.h"

typedef struct sd_logprob {
    int32_t token;                                  /* the emitted token */
    float logprob;                                  /* log_softmax(row)[token] */
    int32_t rank;                                   /* 1 + ids with a strictly larger logprob */
    int32_t n_top;                                  /* entries of top_* in use */
    int32_t top_tokens[SPECDEC_MAX_TOP_LOGPROBS];   /* most likely first; ties: the lower id first */
    float top_logprobs[SPECDEC_MAX_TOP_LOGPROBS];
} sd_logprob;

#endif
