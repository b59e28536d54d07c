/* grammar_mutant.c — a broken sd_cpu_logits_grammar for test_grammar_dist's mutant build: every
 * row is masked with the grammar's state at the round's start, the drafts before the row left
 * out. Linked before the static library, it replaces the real one. */
#include "sd_cpu_logits_proc.h"

specdec_status sd_cpu_logits_grammar(const sd_logits_proc *lp, float *row, int32_t n_vocab, const int32_t *hist,
                                     int32_t n_hist, const int32_t *path, int32_t n_path, int *only_end, sd_errbuf *eb) {
    (void)path, (void)n_path;
    *only_end = 0;
    int32_t s;
    specdec_status st = sd_grammar_state_at(lp->grammar, lp->gcur, hist + lp->n_prompt, n_hist - lp->n_prompt, NULL, 0,
                                            lp->end, lp->n_end, &lp->gate, &s, eb);
    if (st != SPECDEC_OK || s < 0) return st;
    return sd_grammar_apply(lp->grammar, s, row, n_vocab, lp->end, lp->n_end, only_end, eb);
}
