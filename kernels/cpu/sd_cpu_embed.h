/* sd_cpu_embed.h — token embedding lookup.
 *
 * out[t, c] = emb[tokens[t], c] for t < n, c < hidden, with emb [vocab, hidden] in
 * any weight dtype, converted exactly to fp32. Token ids must already be validated
 * to lie in [0, vocab) (the runner does it before touching any state). */
#ifndef SD_CPU_EMBED_H
#define SD_CPU_EMBED_H

#include <stdint.h>
#include "sd_weights.h"

void sd_cpu_embed(const sd_tensor *emb, const int32_t *tokens, int32_t n, float *out);

#endif
