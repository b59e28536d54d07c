/* sd_fsm_check.h — checks shared by the tests of byte automata (core/sd_fsm.h): whether an
 * accepting state is reachable from a state, and one step with the invariants every automaton
 * keeps (header-only; the automata's tests and fuzz targets use them). */
#ifndef SD_FSM_CHECK_H
#define SD_FSM_CHECK_H

#include <stdint.h>
#include <string.h>

#include "sd_fsm.h"

/* Breadth-first search over all 256 bytes from live state s0, for states below cap (queue and
 * seen hold cap entries): 1 if an accepting state is reachable, 0 if not, -1 if not found and
 * some step answered SD_FSM_FULL (inconclusive). *bad counts steps that gave an id outside
 * [0, cap) other than DEAD and FULL. */
static inline int sd_fsm_can_accept(sd_fsm *f, int32_t s0, int32_t cap, int32_t *queue, uint8_t *seen,
                                    long *bad) {
    int32_t qh = 0, qt = 0;
    int full = 0;
    memset(seen, 0, (size_t)cap);
    queue[qt++] = s0;
    seen[s0] = 1;
    while (qh < qt) {
        const int32_t s = queue[qh++];
        if (sd_fsm_accepting(f, s)) return 1;
        for (int b = 0; b < 256; b++) {
            const int32_t t = sd_fsm_step(f, s, (uint8_t)b);
            full |= t == SD_FSM_FULL;
            if (t != SD_FSM_DEAD && t != SD_FSM_FULL && (t < 0 || t >= cap)) (*bad)++;
            else if (t >= 0 && !seen[t]) seen[t] = 1, queue[qt++] = t;
        }
    }
    return full ? -1 : 0;
}

/* One step from live state s, checking: the state count never shrinks and stays <= max_states
 * (*held: the count before, updated); the answer is SD_FSM_DEAD, SD_FSM_FULL (only with
 * max_states states held, unless full_anywhere: an automaton with other bounds, such as
 * core/sd_gbnf.h's stacks and work per step) or an id below the count, the same when asked
 * again. Returns the answer; sets *bad to 1 when a check fails. */
static inline int32_t sd_fsm_step_checked(sd_fsm *f, int32_t s, uint8_t b, int32_t max_states, int full_anywhere,
                                          int32_t *held, int *bad) {
    const int32_t t = sd_fsm_step(f, s, b);
    const int32_t now = f->vt->n_states(f);
    if (now < *held || now > max_states) *bad = 1;
    *held = now;
    if (t == SD_FSM_DEAD) return t;
    if (t == SD_FSM_FULL) {
        if (now != max_states && !full_anywhere) *bad = 1;
        return t;
    }
    if (t < 0 || t >= now || sd_fsm_step(f, s, b) != t) *bad = 1;
    return t;
}

#endif
