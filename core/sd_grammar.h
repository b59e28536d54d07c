/* sd_grammar.h — structured output at the token level (docs/STRUCTURED.md): a compiled grammar
 * (specdec_grammar) is a byte automaton (core/sd_fsm.h: a regex DFA, a JSON pushdown automaton)
 * plus the vocabulary's bytes; it answers, for an automaton state, which tokens may come next
 * (their bytes continue a match) and, for a token, the state after it.
 *
 * The vocabulary (sd_grammar_vocab) is built once per tokenizer (tokenizer/: every token's bytes
 * as they appear inside a text) and shared by every grammar compiled against it. Its text tokens
 * are kept sorted by their bytes, with the common prefix of neighbours, so a state's mask walks
 * the automaton once per distinct prefix and skips every token below a dead prefix.
 *
 * A grammar is shared and reference-counted: the API's caller holds one reference, every request
 * using it holds another (the scheduler's take theirs at submit). It is internally locked: the
 * automaton interns states lazily and the masks are cached per state, so many sequences (on any
 * threads) may use one grammar at once.
 *
 * Where the engine uses it (the logits processors, core/sd_logits_proc.h): a row whose history
 * puts the automaton in a live state s gets -inf at every token the state does not allow; the
 * sequence's end tokens (its EOS ids and stop_token_ids) are allowed exactly when s is accepting;
 * if s allows no token at all (the vocabulary cannot spell any continuation) the end tokens are
 * allowed, so the sequence ends instead of sampling from nothing. A row below a draft token the
 * grammar refuses (state SD_FSM_DEAD) is left as it is: that draft is rejected with certainty
 * (its target probability is 0), so the row is never sampled. */
#ifndef SD_GRAMMAR_H
#define SD_GRAMMAR_H

#include <stdatomic.h>
#include <stdint.h>

#include "sd_error.h"
#include "sd_fsm.h"
#include "sd_logits_proc.h" /* sd_grammar_gate */
#include "specdec.h"

/* Most bytes one token may have for structured output (longer ones are never allowed). */
#define SD_GRAMMAR_MAX_TOKEN_BYTES 4096
/* Memory the per-state masks of one grammar may hold before the cache is emptied (~860 states of
 * a 152k vocabulary; an output of a few hundred tokens visits far fewer). */
#define SD_GRAMMAR_MASK_CACHE_BYTES ((size_t)16 << 20)
/* Most end tokens of one sequence (its EOS ids and stop_token_ids). */
#define SD_GRAMMAR_MAX_ENDS (SPECDEC_MAX_EOS + SPECDEC_MAX_STOP_TOKEN_IDS)

typedef struct sd_grammar_vocab {
    atomic_int refs;
    int32_t n;            /* token ids 0..n */
    uint32_t *off;        /* [n + 1]: token t's bytes are bytes[off[t] .. off[t + 1]) */
    uint8_t *bytes;
    uint8_t *text;        /* [n]: 1 if t is a text token (some bytes, not special, not too long) */
    int32_t *order;       /* [n_order]: the text tokens sorted by their bytes */
    uint32_t *lcp;        /* [n_order]: bytes order[i] shares with order[i - 1] (lcp[0] = 0) */
    int32_t n_order;
    int32_t max_len;      /* longest text token */
} sd_grammar_vocab;

/* A vocabulary from n tokens' bytes (off[n + 1], bytes; text[t] 0 marks tokens that have no
 * text: special tokens and holes). It takes the three arrays (sd_malloc'd) even on failure.
 * One reference, the caller's. */
specdec_status sd_grammar_vocab_create(int32_t n, uint32_t *off, uint8_t *bytes, uint8_t *text, sd_grammar_vocab **out,
                                       sd_errbuf *eb);
void sd_grammar_vocab_retain(sd_grammar_vocab *v);
void sd_grammar_vocab_release(sd_grammar_vocab *v);

/* A grammar over vocab v (retained) and automaton fsm (taken, even on failure). One reference,
 * the caller's. */
specdec_status sd_grammar_create(sd_grammar_vocab *v, sd_fsm *fsm, specdec_grammar **out, sd_errbuf *eb);
void sd_grammar_retain(const specdec_grammar *g);
void sd_grammar_release(const specdec_grammar *g);
int32_t sd_grammar_start(const specdec_grammar *g);

/* The state after token t from live state s: a live id, SD_FSM_DEAD (t's bytes cannot continue
 * a match, t is not a text token or not in the vocabulary) or SD_FSM_FULL. */
int32_t sd_grammar_next(const specdec_grammar *g, int32_t s, int32_t t);

/* What live state s allows (a gated state: everything, the row unchanged, *only_end = 0),
 * applied to a row of n_row logits: every token it does not allow
 * becomes -inf (ids >= the vocabulary included); ends[0..n_ends) (the end tokens) stay as they
 * are when s is accepting or allows no other token, else become -inf. *only_end = 1 when s
 * allows no text token (then nothing but an end token can follow: callers let it through
 * min_tokens). SPECDEC_ERR_UNSUPPORTED when the automaton passed its state limit,
 * OUT_OF_MEMORY. */
specdec_status sd_grammar_apply(const specdec_grammar *g, int32_t s, float *row, int32_t n_row, const int32_t *ends,
                                int32_t n_ends, int *only_end, sd_errbuf *eb);

/* 1 if t is one of ends[0..n_ends) (the end tokens). */
int sd_grammar_is_end(int32_t t, const int32_t *ends, int32_t n_ends);

/* A gated grammar (specdec_generate_params.grammar_after_tokens, since 0.5.4): the sequence's
 * marker tokens gate[0..n_gate) (n_gate 0: no gate). Until the output contains the marker the
 * grammar is inactive: the state is SD_GRAMMAR_GATED + k, k the marker tokens matched at the end
 * of the output so far (0..n_gate-1; such a state counts as live, >= 0). The marker's last token
 * leads to the automaton's start state, and the grammar acts from the next row on. A gated state
 * masks nothing (sd_grammar_apply leaves the row as it is), forces nothing (sd_grammar_forced)
 * and refuses nothing (sd_grammar_step). */
#define SD_GRAMMAR_GATED 0x7f000000 /* far above any automaton's state limit */
static inline int sd_grammar_gated(int32_t s) { return s >= SD_GRAMMAR_GATED; }
/* The state before any output: SD_GRAMMAR_GATED with a gate, else the automaton's start. */
int32_t sd_grammar_initial(const specdec_grammar *g, const sd_grammar_gate *gate);

/* The state after token t from state s on a draft path, as sd_grammar_state_at walks one: an end
 * token keeps the state, a text token is sd_grammar_next (from a gated state: the marker's
 * progress, the start state once it is complete); s not live stays SD_FSM_DEAD. gate may be NULL. */
int32_t sd_grammar_step(const specdec_grammar *g, int32_t s, int32_t t, const int32_t *ends, int32_t n_ends,
                        const sd_grammar_gate *gate);

/* Jump-forward: *token = the one token live state s allows (-1 for a gated state; what
 * sd_grammar_apply leaves finite
 * in a row of n_row logits: a single text token, the state not accepting, so no end token
 * either), else -1. A row masked at s then gives that token probability 1 whatever the sampling
 * parameters. Same errors as sd_grammar_apply. */
specdec_status sd_grammar_forced(const specdec_grammar *g, int32_t s, int32_t n_row, const int32_t *ends, int32_t n_ends,
                                 int32_t *token, sd_errbuf *eb);

/* A sequence's place in its grammar: the state after the first n_done generated tokens. */
typedef struct sd_grammar_cursor {
    int32_t n_done;
    int32_t state;
} sd_grammar_cursor;

/* The state after the generated tokens gen[0..n_gen) and then path[0..n_path) (a round's drafts),
 * advancing the cursor over gen (a sequence only grows while it generates). A generated token
 * that the grammar refuses is SPECDEC_ERR_INTERNAL (every row it was drawn from was masked); a
 * refused path token gives *state = SD_FSM_DEAD. An end token (ends[]) keeps the state: with
 * ignore_eos an EOS may be generated and the output goes on. gate (NULL: none) as for
 * sd_grammar_step: the marker may end anywhere in gen or path. */
specdec_status sd_grammar_state_at(const specdec_grammar *g, sd_grammar_cursor *cur, const int32_t *gen, int32_t n_gen,
                                   const int32_t *path, int32_t n_path, const int32_t *ends, int32_t n_ends,
                                   const sd_grammar_gate *gate, int32_t *state, sd_errbuf *eb);

#endif
