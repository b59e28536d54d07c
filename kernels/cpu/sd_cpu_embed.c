/* sd_cpu_embed.c — token embedding lookup (see sd_cpu_embed.h). */
#include "sd_cpu_embed.h"
#include "sd_cpu_dequant.h"

void sd_cpu_embed(const sd_tensor *emb, const int32_t *tokens, int32_t n, float *out) {
    int64_t hidden = emb->shape[1];
    for (int32_t t = 0; t < n; t++) sd_cpu_dequant(emb, (int64_t)tokens[t] * hidden, hidden, out + (int64_t)t * hidden);
}
