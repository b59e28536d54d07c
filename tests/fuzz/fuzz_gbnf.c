/* fuzz_gbnf.c — fuzz target: core/sd_gbnf.h. Input: byte 0 picks max_states (1..64: the
 * viability search below walks every reached state's 256 bytes, and an ambiguous grammar's steps
 * are costly), then the grammar text up to the first NUL byte, then the bytes walked through the
 * automaton (at most 512).
 * Checked: creation gives OK with a live start state, or INVALID_ARGUMENT / UNSUPPORTED /
 * OUT_OF_MEMORY with a "gbnf: ..." message and no automaton; every step answers a state id below
 * n_states <= max_states, SD_FSM_DEAD or SD_FSM_FULL (FULL also before max_states: the stack,
 * work and node bounds), a live answer the same when asked twice, the state count never
 * shrinking; every live state reached can still reach acceptance (a breadth-first search over all
 * 256 bytes, unless the search itself meets FULL); every accepted prefix is valid UTF-8. ok_*
 * seeds must compile, bad_* must be refused. */
#include "fuzz_common.h"

#include "fuzz_fsm_walk.h"
#include "sd_gbnf.h"

#define FZ_WALK_MAX 512

int sd_fuzz_one(const uint8_t *data, size_t size) {
    sd_fuzz_in in = {data, size};
    const uint8_t b0 = sd_fuzz_u8(&in);
    const int32_t max_states = 1 + b0 % FZ_MAX_STATES;
    const uint8_t *nul = in.n ? memchr(in.p, 0, in.n) : NULL;
    const size_t glen = nul ? (size_t)(nul - in.p) : in.n;
    const uint8_t *walk = nul ? nul + 1 : in.p + in.n;
    size_t wlen = nul ? in.n - glen - 1 : 0;
    if (wlen > FZ_WALK_MAX) wlen = FZ_WALK_MAX;
    sd_fsm *f = NULL;
    sd_errbuf eb;
    eb.msg[0] = '\0';
    const specdec_status st = sd_gbnf_fsm_create((const char *)in.p, glen, max_states, &f, &eb);
    if (st != SPECDEC_OK) {
        sd_fuzz_require(f == NULL);
        sd_fuzz_require(st == SPECDEC_ERR_INVALID_ARGUMENT || st == SPECDEC_ERR_UNSUPPORTED ||
                        st == SPECDEC_ERR_OUT_OF_MEMORY);
        sd_fuzz_require(!strncmp(eb.msg, "gbnf: ", 6));
        return (int)st;
    }
    sd_fuzz_require(f != NULL && f->start == 0 && f->vt->n_states(f) == 1);
    fz_walk(f, max_states, walk, wlen, 1);
    sd_fsm_free(f);
    return 0;
}

SD_FUZZ_DEFINE_ENTRY
