/* sd_cpu_logits_proc.c — logits processors on one row (see sd_cpu_logits_proc.h). */
#include "sd_cpu_logits_proc.h"

#include <math.h>

#define IN_PROMPT 0x40000000 /* counts[t]: t occurs in the prompt; the low bits count its generations */

void sd_cpu_logits_proc(const sd_logits_proc *lp, float *row, int32_t n_vocab, const int32_t *hist, int32_t n_hist,
                        const int32_t *path, int32_t n_path, int32_t *counts, int32_t *list) {
    (void)n_vocab; /* every id was checked against the vocabulary when the generation began */
    const int32_t n = n_hist + n_path;
    for (int32_t i = 0; i < lp->n_bias; i++) row[lp->bias[i].token] += lp->bias[i].bias;
    if (n - lp->n_prompt < lp->min_tokens)
        for (int32_t i = 0; i < lp->n_ban; i++) row[lp->ban[i]] = -INFINITY;
    const int rep = lp->repetition != 1.0f, pen = lp->frequency != 0.0f || lp->presence != 0.0f;
    if (!rep && !pen) return;
    /* the distinct ids of the history that matter, and how often each was generated */
    int32_t n_list = 0;
    for (int32_t j = rep ? 0 : lp->n_prompt; j < n; j++) {
        const int32_t t = j < n_hist ? hist[j] : path[j - n_hist];
        if (counts[t] == 0) list[n_list++] = t;
        counts[t] = j < lp->n_prompt ? counts[t] | IN_PROMPT : counts[t] + 1;
    }
    for (int32_t i = 0; i < n_list; i++) {
        const int32_t t = list[i], c = counts[t] & (IN_PROMPT - 1);
        float x = row[t];
        if (rep) x = x > 0.0f ? x / lp->repetition : x * lp->repetition;
        if (c > 0) {
            x -= lp->frequency * (float)c;
            x -= lp->presence;
        }
        row[t] = x;
        counts[t] = 0;
    }
}
