/* logits_proc_mutant.c — a broken sd_cpu_logits_proc for test_logits_proc_dist's mutant build:
 * it processes every row with the history of the round's start (hist) and leaves out the
 * drafts before the row (path). Linked before the static library, it replaces the real one. */
#include "logits_proc_ref.h"
#include "sd_cpu_logits_proc.h"

void sd_cpu_logits_proc(const sd_logits_proc *lp, float *row, int32_t n_vocab, const int32_t *hist, int32_t n_hist,
                        const int32_t *path, int32_t n_path, int32_t *counts, int32_t *list) {
    (void)path, (void)n_path, (void)counts, (void)list;
    ref_proc(lp, row, n_vocab, hist, n_hist);
}
