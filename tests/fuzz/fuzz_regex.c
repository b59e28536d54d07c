/* fuzz_regex.c — fuzz target: core/sd_regex.h. Input: byte 0 picks max_states (1..64), then the
 * pattern up to the first NUL byte, then the bytes walked through the automaton.
 * Checked: creation gives OK with a live start state, or INVALID_ARGUMENT / UNSUPPORTED /
 * OUT_OF_MEMORY with a "regex: ..." message and no automaton; every step answers a state id below
 * n_states <= max_states, SD_FSM_DEAD or SD_FSM_FULL (FULL only with max_states states held),
 * the same again when asked twice; every live state reached can still reach acceptance (a
 * breadth-first search over all 256 bytes, unless the search itself meets FULL); every accepted
 * prefix is valid UTF-8. ok_* seeds must compile, bad_* must be refused. */
#include "fuzz_common.h"

#include "fuzz_fsm_walk.h"
#include "sd_regex.h"

int sd_fuzz_one(const uint8_t *data, size_t size) {
    sd_fuzz_in in = {data, size};
    const int32_t max_states = 1 + sd_fuzz_u8(&in) % FZ_MAX_STATES;
    const uint8_t *nul = in.n ? memchr(in.p, 0, in.n) : NULL;
    const size_t plen = nul ? (size_t)(nul - in.p) : in.n;
    const uint8_t *walk = nul ? nul + 1 : in.p + in.n;
    const size_t wlen = nul ? in.n - plen - 1 : 0;
    sd_fsm *f = NULL;
    sd_errbuf eb;
    eb.msg[0] = '\0';
    specdec_status st = sd_regex_fsm_create((const char *)in.p, plen, max_states, &f, &eb);
    if (st != SPECDEC_OK) {
        sd_fuzz_require(f == NULL);
        sd_fuzz_require(st == SPECDEC_ERR_INVALID_ARGUMENT || st == SPECDEC_ERR_UNSUPPORTED ||
                        st == SPECDEC_ERR_OUT_OF_MEMORY);
        sd_fuzz_require(!strncmp(eb.msg, "regex: ", 7));
        return (int)st;
    }
    sd_fuzz_require(f != NULL && f->start >= 0 && f->start < f->vt->n_states(f));
    sd_fuzz_require(f->vt->n_states(f) >= 1 && f->vt->n_states(f) <= max_states);
    fz_walk(f, max_states, walk, wlen, 0);
    sd_fsm_free(f);
    return 0;
}

SD_FUZZ_DEFINE_ENTRY
