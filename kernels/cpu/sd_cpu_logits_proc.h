/* sd_cpu_logits_proc.h — a sequence's logits processors applied to one row of logits
 * (core/sd_logits_proc.h; specdec_generate_params "Logits processors", docs/SAMPLING.md).
 *
 * The row scores the token at position n = n_hist + n_path, whose history is hist[0..n_hist)
 * followed by path[0..n_path) (a round's drafts before it); history[0..lp->n_prompt) is the
 * prompt, the rest was generated. In order, in float (vLLM v1's order):
 *   0a. allowed_token_ids (n_allowed > 0): row[t] = -inf for every t not listed;
 *   0b. bad words: for each sequence w of k ids, row[w[k-1]] = -inf when the generated part
 *       of the history holds at least k-1 tokens and ends with w[0..k-2] (k = 1: always);
 *   1. row[t] += bias for every logit_bias entry (t, bias);
 *   2. when n - n_prompt < min_tokens: row[t] = -inf for every banned id (EOS, stop_token_ids);
 *   3. repetition r != 1, for every distinct t in the whole history: row[t] = row[t] > 0 ?
 *      row[t] / r : row[t] * r;
 *   4. for every distinct t generated c > 0 times: row[t] -= frequency * c, then -= presence.
 * The result depends only on the row, the processors and the history, never on the batch. */
#ifndef SD_CPU_LOGITS_PROC_H
#define SD_CPU_LOGITS_PROC_H

#include <stdint.h>

#include "sd_grammar.h"
#include "sd_logits_proc.h"

/* counts: n_vocab int32 scratch, all zero on entry and again on return; list: n_vocab int32
 * scratch. */
void sd_cpu_logits_proc(const sd_logits_proc *lp, float *row, int32_t n_vocab, const int32_t *hist, int32_t n_hist,
                        const int32_t *path, int32_t n_path, int32_t *counts, int32_t *list);

/* Structured output, before the processors above (lp->grammar set): the grammar's state after
 * the generated part of the history and the path (advancing lp->gcur), then its mask on the row
 * (core/sd_grammar.h). *only_end = 1 when the state lets nothing but an end token follow: the
 * caller then lifts the min_tokens ban for this row. A path the grammar refuses leaves the row
 * as it is (its draft is rejected with certainty). */
specdec_status sd_cpu_logits_grammar(const sd_logits_proc *lp, float *row, int32_t n_vocab, const int32_t *hist,
                                     int32_t n_hist, const int32_t *path, int32_t n_path, int *only_end, sd_errbuf *eb);

#endif
