/* sd_fsm_check.h — a check shared by the tests of byte automata (core/sd_fsm.h): whether an
 * accepting state is reachable from a state (header-only; test_regex and fuzz_regex use it). */
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

#endif
