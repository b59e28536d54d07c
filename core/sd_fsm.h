/* sd_fsm.h — a byte automaton: what structured output (core/sd_grammar.h, docs/STRUCTURED.md)
 * walks the bytes of candidate tokens through. Two kinds implement it:
 *   - core/sd_regex.h: a regular expression as a lazily built DFA over bytes;
 *   - core/sd_json_fsm.h: any JSON value (or object) as a pushdown automaton whose
 *     configurations (lexical state + container stack) are interned as state ids.
 *
 * States are small non-negative ids, interned: equal configurations have equal ids, so a
 * caller may cache per state (its token mask, its transitions). Every live state can still
 * reach an accepting one (a state from which no continuation matches is SD_FSM_DEAD, never a
 * live id), so a sequence constrained by an automaton is never left without a way to finish.
 *
 * An automaton is not thread-safe: step() may intern new states. Its one owner (a compiled
 * grammar) serialises calls with its own lock. */
#ifndef SD_FSM_H
#define SD_FSM_H

#include <stdint.h>

#define SD_FSM_DEAD (-1) /* no string with these bytes as a prefix matches */
#define SD_FSM_FULL (-2) /* the automaton reached its state limit (the request fails cleanly) */

typedef struct sd_fsm sd_fsm;

typedef struct sd_fsm_vtable {
    /* The state after byte b from live state s: a live id >= 0, SD_FSM_DEAD or SD_FSM_FULL
     * (also on out of memory while interning). Deterministic: the same (s, b) always gives
     * the same answer once it gave a live id. */
    int32_t (*step)(sd_fsm *f, int32_t s, uint8_t b);
    /* 1 if the bytes that led to live state s form a whole match. */
    int (*accepting)(const sd_fsm *f, int32_t s);
    /* How many states are interned now (for limits and tests). */
    int32_t (*n_states)(const sd_fsm *f);
    void (*destroy)(sd_fsm *f);
} sd_fsm_vtable;

struct sd_fsm {
    const sd_fsm_vtable *vt;
    int32_t start; /* the state before any byte */
};

static inline int32_t sd_fsm_step(sd_fsm *f, int32_t s, uint8_t b) { return f->vt->step(f, s, b); }
static inline int sd_fsm_accepting(const sd_fsm *f, int32_t s) { return f->vt->accepting(f, s); }
static inline void sd_fsm_free(sd_fsm *f) {
    if (f) f->vt->destroy(f);
}

#endif
