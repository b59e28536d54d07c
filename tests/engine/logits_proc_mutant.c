/* logits_proc_mutant.c — a broken sd_cpu_logits_proc for test_logits_proc_dist's mutant build:
 * it processes every row with the history of the round's start (hist) and leaves out the
 * drafts before the row (path). Linked before the static library, it replaces the real one. */
#include <math.h>

#include "sd_cpu_logits_proc.h"

void sd_cpu_logits_proc(const sd_logits_proc *lp, float *row, int32_t n_vocab, const int32_t *hist, int32_t n_hist,
                        const int32_t *path, int32_t n_path, int32_t *counts, int32_t *list) {
    (void)path, (void)n_path, (void)counts, (void)list;
    for (int32_t i = 0; i < lp->n_bias; i++) row[lp->bias[i].token] += lp->bias[i].bias;
    if (n_hist - lp->n_prompt < lp->min_tokens)
        for (int32_t i = 0; i < lp->n_ban; i++) row[lp->ban[i]] = -INFINITY;
    for (int32_t t = 0; t < n_vocab; t++) {
        int seen = 0, gen = 0;
        for (int32_t j = 0; j < n_hist; j++)
            if (hist[j] == t) seen = 1, gen += j >= lp->n_prompt;
        if (lp->repetition != 1.0f && seen) row[t] = row[t] > 0.0f ? row[t] / lp->repetition : row[t] * lp->repetition;
        if (gen) row[t] -= lp->frequency * (float)gen + lp->presence;
    }
}
