/* sd_cpu_logits_proc.c — logits processors on one row (see sd_cpu_logits_proc.h). */
#include "sd_cpu_logits_proc.h"

#include <math.h>

#define IN_PROMPT 0x40000000 /* counts[t]: t occurs in the prompt; the low bits count its generations */

/* allowed_token_ids: counts marks the allowed ids (and is cleared again). */
static void proc_allowed(const sd_logits_proc *lp, float *row, int32_t n_vocab, int32_t *counts) {
    for (int32_t i = 0; i < lp->n_allowed; i++) counts[lp->allowed[i]] = 1;
    for (int32_t t = 0; t < n_vocab; t++)
        if (!counts[t]) row[t] = -INFINITY;
    for (int32_t i = 0; i < lp->n_allowed; i++) counts[lp->allowed[i]] = 0;
}

/* bad_words: w bans its last id when the generated tokens end with the rest of w. */
static void proc_bad_words(const sd_logits_proc *lp, float *row, const int32_t *hist, int32_t n_hist,
                           const int32_t *path, int32_t n) {
    for (int32_t i = 0; i < lp->n_bad; i++) {
        const int32_t *w = lp->bad_ids + lp->bad_offsets[i];
        const int32_t k = lp->bad_offsets[i + 1] - lp->bad_offsets[i];
        if (k - 1 > n - lp->n_prompt) continue; /* the output is shorter than the prefix */
        int32_t j = 0;
        for (; j < k - 1; j++) {
            const int32_t at = n - (k - 1) + j;
            if ((at < n_hist ? hist[at] : path[at - n_hist]) != w[j]) break;
        }
        if (j == k - 1) row[w[k - 1]] = -INFINITY;
    }
}

void sd_cpu_logits_proc(const sd_logits_proc *lp, float *row, int32_t n_vocab, const int32_t *hist, int32_t n_hist,
                        const int32_t *path, int32_t n_path, int32_t *counts, int32_t *list) {
    /* every id was checked against the vocabulary when the generation began */
    const int32_t n = n_hist + n_path;
    if (lp->n_allowed > 0) proc_allowed(lp, row, n_vocab, counts);
    if (lp->n_bad > 0) proc_bad_words(lp, row, hist, n_hist, path, n);
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
