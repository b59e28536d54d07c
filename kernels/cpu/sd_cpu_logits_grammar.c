/* sd_cpu_logits_grammar.c — structured output on one row (see sd_cpu_logits_proc.h; its own file so
 * that a test can link a broken one in its place). */
#include "sd_cpu_logits_proc.h"

specdec_status sd_cpu_logits_grammar(const sd_logits_proc *lp, float *row, int32_t n_vocab, const int32_t *hist,
                                     int32_t n_hist, const int32_t *path, int32_t n_path, int *only_end, sd_errbuf *eb) {
    *only_end = 0;
    int32_t s;
    specdec_status st = sd_grammar_state_at(lp->grammar, lp->gcur, hist + lp->n_prompt, n_hist - lp->n_prompt, path, n_path,
                                            lp->end, lp->n_end, &lp->gate, &s, eb);
    if (st != SPECDEC_OK || s < 0) return st;
    return sd_grammar_apply(lp->grammar, s, row, n_vocab, lp->end, lp->n_end, only_end, eb);
}
