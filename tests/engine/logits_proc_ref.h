/* logits_proc_ref.h — the brute-force reference of the logits processors (test_logits_proc_dist.c;
 * its mutant build, logits_proc_mutant.c, applies it without the drafts): for every token id,
 * count its occurrences in the prompt and in the generated part of the history by scanning, then
 * apply the formula of kernels/cpu/sd_cpu_logits_proc.h (allowed ids by scanning the list, bad
 * words by comparing the history's tail). Header-only. */
#ifndef LOGITS_PROC_REF_H
#define LOGITS_PROC_REF_H

#include <math.h>

#include "sd_logits_proc.h"

/* Applies lp to row for the token after hist[0..n) (brute force). */
static inline void ref_proc(const sd_logits_proc *lp, float *row, int32_t V_, const int32_t *hist, int32_t n) {
    if (lp->n_allowed > 0)
        for (int32_t t = 0; t < V_; t++) {
            int listed = 0;
            for (int32_t i = 0; i < lp->n_allowed; i++) listed |= lp->allowed[i] == t;
            if (!listed) row[t] = -INFINITY;
        }
    for (int32_t i = 0; i < lp->n_bad; i++) { /* w = prefix + last: the output ends with prefix */
        const int32_t *w = lp->bad_ids + lp->bad_offsets[i], k = lp->bad_offsets[i + 1] - lp->bad_offsets[i];
        int match = n - lp->n_prompt >= k - 1;
        for (int32_t j = 0; match && j < k - 1; j++) match = hist[n - k + 1 + j] == w[j];
        if (match) row[w[k - 1]] = -INFINITY;
    }
    for (int32_t i = 0; i < lp->n_bias; i++) row[lp->bias[i].token] += lp->bias[i].bias;
    if (n - lp->n_prompt < lp->min_tokens)
        for (int32_t i = 0; i < lp->n_ban; i++) row[lp->ban[i]] = -INFINITY;
    for (int32_t t = 0; t < V_; t++) {
        int in_prompt = 0, gen = 0;
        for (int32_t j = 0; j < n; j++)
            if (hist[j] == t) {
                if (j < lp->n_prompt) in_prompt = 1;
                else gen++;
            }
        float x = row[t];
        if (lp->repetition != 1.0f && (in_prompt || gen)) x = x > 0.0f ? x / lp->repetition : x * lp->repetition;
        if (gen > 0) {
            x -= lp->frequency * (float)gen;
            x -= lp->presence;
        }
        row[t] = x;
    }
}

#endif
