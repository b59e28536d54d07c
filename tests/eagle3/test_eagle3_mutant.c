/* test_eagle3_mutant.c — a deliberately broken eagle3 drafter, linked INSTEAD of the library's
 * (core/sd_drafter_eagle3.c is compiled here with another draft rule) into eagle3_gen_mutant
 * (test_eagle3_gen.c with SD_E3_MUTANT): it drafts the argmax of q row j but hands the
 * verifier the whole row as q — the classic "EAGLE drafts greedily, claim q = softmax" bug.
 * Rejection sampling is then biased towards the draft argmax; the G-test must reject.
 * Built only for the tests; the library never contains a mutant. */
#include "sd_round.h"

static specdec_status e3_mutant_sample(sd_round_slot *x, int32_t j, int32_t V) {
    const float *q = x->q + (size_t)j * (size_t)V;
    int32_t best = 0;
    for (int32_t t = 1; t < V; t++)
        if (q[t] > q[best]) best = t;
    x->vtok[1 + j] = best;
    return SPECDEC_OK;
}

#define SD_E3_DRAFT_SAMPLE(ex, x, j) e3_mutant_sample((x), (j), h->base.n_vocab)
#include "../../core/sd_drafter_eagle3.c"
