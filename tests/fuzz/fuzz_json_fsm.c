/* fuzz_json_fsm.c — fuzz target: core/sd_json_fsm.h. Input: byte 0 flags (bit 0 object_only,
 * bits 1..3 max_depth 1..8, bit 4 max_depth 64 instead, bit 5 max_states 1..64 from byte 1
 * instead of 2^20), byte 1, then the text walked through the automaton.
 * Checked: creation OK with a live start; every step answers a state id below n_states <=
 * max_states, SD_FSM_DEAD or SD_FSM_FULL (FULL only with max_states states held), the same
 * again when asked twice; at the end (no FULL) accepted == the oracle of
 * tests/common/sd_json_oracle.h (cJSON's sd_json_parse + a strict scan + the bounds); viability
 * both ways: a live prefix (the whole text, or the one before a dead byte) has a completion the
 * oracle accepts and the automaton walks to acceptance, a dead one has none. ok_* seeds must be
 * accepted, bad_* refused (the return value is 1 for a text not accepted). */
#include "fuzz_common.h"

#include "sd_fsm_check.h"
#include "sd_json_fsm.h"
#include "sd_json_oracle.h"

#define FZ_TEXT_MAX 4096

/* 1 if the greedy completion of w[0..n) is in the language; with a roomy automaton, walking it
 * through f must then reach acceptance too. */
static int fz_viable(sd_fsm *f, int object_only, int max_depth, int roomy, const uint8_t *w, size_t n) {
    static uint8_t out[FZ_TEXT_MAX + SD_JO_COMPLETE_EXTRA];
    const size_t len = sd_jo_complete(w, n, object_only, out);
    const int ok = sd_jo_accepts(out, len, object_only, max_depth);
    sd_fuzz_require(ok >= 0);
    if (ok && roomy) {
        int32_t s = f->start;
        for (size_t i = 0; i < len && s >= 0; i++) s = sd_fsm_step(f, s, out[i]);
        sd_fuzz_require(s == SD_FSM_FULL || (s >= 0 && sd_fsm_accepting(f, s)));
    }
    return ok;
}

/* Walks w: the index of the first dead or FULL byte (n if none), *end the last live state,
 * *full whether FULL stopped it. */
static size_t fz_walk(sd_fsm *f, int32_t max_states, const uint8_t *w, size_t n, int32_t *end, int *full) {
    int32_t s = f->start, held = f->vt->n_states(f);
    size_t i = 0;
    *full = 0;
    for (; i < n; i++) {
        int bad = 0;
        const int32_t t = sd_fsm_step_checked(f, s, w[i], max_states, 0, &held, &bad);
        sd_fuzz_require(!bad);
        *full = t == SD_FSM_FULL;
        if (t < 0) break;
        s = t;
    }
    *end = s;
    return i;
}

int sd_fuzz_one(const uint8_t *data, size_t size) {
    sd_fuzz_in in = {data, size};
    const uint8_t flags = sd_fuzz_u8(&in), b1 = sd_fuzz_u8(&in);
    const int object_only = flags & 1, roomy = !(flags & 32);
    const int32_t max_depth = flags & 16 ? 64 : 1 + (flags >> 1 & 7);
    const int32_t max_states = roomy ? 1 << 20 : 1 + b1 % 64;
    const size_t n = in.n < FZ_TEXT_MAX ? in.n : FZ_TEXT_MAX;
    sd_fsm *f = NULL;
    sd_errbuf eb;
    const specdec_status st = sd_json_fsm_create(object_only, max_depth, max_states, &f, &eb);
    sd_fuzz_require(st == SPECDEC_OK && f != NULL && f->start == 0 && f->vt->n_states(f) == 1);
    int32_t s;
    int full;
    const size_t at = fz_walk(f, max_states, in.p, n, &s, &full);
    int accepted = 0;
    if (!full) {
        const int live = at == n;
        accepted = live && sd_fsm_accepting(f, s);
        const int oracle = sd_jo_accepts(in.p, n, object_only, max_depth);
        sd_fuzz_require(oracle >= 0 && accepted == oracle);
        sd_fuzz_require(fz_viable(f, object_only, max_depth, roomy, in.p, at));
        if (!live) sd_fuzz_require(!fz_viable(f, object_only, max_depth, roomy, in.p, at + 1));
    }
    sd_fsm_free(f);
    return accepted ? 0 : 1;
}

SD_FUZZ_DEFINE_ENTRY
