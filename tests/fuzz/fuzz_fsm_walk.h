/* fuzz_fsm_walk.h — the walk the fuzz targets of byte automata built from a text share
 * (fuzz_regex, fuzz_gbnf): from the start state over w[0..n), every step checked
 * (sd_fsm_step_checked; full_anywhere: the automaton may answer SD_FSM_FULL before max_states),
 * every live state reached able to reach acceptance (a breadth-first search over all 256
 * bytes, unless the search itself meets FULL), every accepted prefix valid UTF-8. Stops at the
 * first DEAD or FULL answer. max_states <= FZ_MAX_STATES. */
#ifndef FUZZ_FSM_WALK_H
#define FUZZ_FSM_WALK_H

#include "fuzz_common.h"
#include "sd_fsm_check.h"

#define FZ_MAX_STATES 64

static void fz_walk(sd_fsm *f, int32_t max_states, const uint8_t *w, size_t n, int full_anywhere) {
    uint8_t checked[FZ_MAX_STATES] = {0}, seen[FZ_MAX_STATES];
    int32_t queue[FZ_MAX_STATES];
    int32_t s = f->start, held = f->vt->n_states(f);
    for (size_t i = 0;; i++) {
        if (!checked[s]) {
            checked[s] = 1;
            long bad = 0;
            sd_fuzz_require(sd_fsm_can_accept(f, s, max_states, queue, seen, &bad) != 0 && bad == 0);
        }
        if (sd_fsm_accepting(f, s)) sd_fuzz_require(sd_fuzz_utf8_ok((const char *)w, i));
        if (i == n) break;
        int bad = 0;
        const int32_t t = sd_fsm_step_checked(f, s, w[i], max_states, full_anywhere, &held, &bad);
        sd_fuzz_require(!bad);
        if (t < 0) break; /* DEAD or FULL */
        s = t;
    }
}

#endif
