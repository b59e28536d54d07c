/* sd_logits_proc.h — a sequence's logits processors (specdec_generate_params "Logits
 * processors", docs/SAMPLING.md): what they are, fixed for a whole generation. The loop
 * (runtime/sd_generate.c) fills one per sequence that asks for any; the round hands it, with
 * the history of each row, to the executor's row processing (kernels/cpu/sd_cpu_logits_proc.h
 * applies it). A device executor leaves such a sequence to its host fallback. */
#ifndef SD_LOGITS_PROC_H
#define SD_LOGITS_PROC_H

#include <stdint.h>

#include "specdec.h"

/* core/sd_grammar.h (C only: it uses stdatomic; the CUDA round's C++ sees this header) */
typedef struct sd_grammar_cursor sd_grammar_cursor;
/* A grammar's activation marker (core/sd_grammar.h "gated grammar"; the params'
 * grammar_after_tokens, since 0.5.4). */
typedef struct sd_grammar_gate {
    const int32_t *tok; /* borrowed; NULL / n 0: the grammar is active from the first token */
    int32_t n;          /* 0..SPECDEC_MAX_GRAMMAR_AFTER_TOKENS */
} sd_grammar_gate;

typedef struct sd_logits_proc {
    const specdec_logit_bias *bias; /* borrowed from the params */
    int32_t n_bias;
    int32_t min_tokens;             /* the banned ids are -inf while fewer tokens were generated */
    int32_t n_ban;                  /* banned ids: the EOS ids (unless ignore_eos), then stop_token_ids */
    int32_t ban[SPECDEC_MAX_EOS + SPECDEC_MAX_STOP_TOKEN_IDS];
    float presence, frequency;      /* OpenAI's, over the generated tokens */
    float repetition;               /* HF's, over the prompt and the generated tokens; 1 = off */
    int32_t n_prompt;               /* history[0..n_prompt) is the prompt */
    /* vLLM's masks (since 0.5.2), borrowed from the params: allowed[0..n_allowed) the only ids
     * kept (n_allowed 0: off); bad word i is bad_ids[bad_offsets[i] .. bad_offsets[i+1]) */
    const int32_t *allowed;
    int32_t n_allowed;
    int32_t n_bad;
    const int32_t *bad_ids;
    const int32_t *bad_offsets;
    /* structured output (core/sd_grammar.h): NULL, or the grammar every generated token obeys,
     * applied first; gcur the sequence's place in it (the loop's, mutable); end[0..n_end) the
     * tokens that may end the output at an accepting state (the EOS ids, ignore_eos or not, then
     * stop_token_ids) */
    const specdec_grammar *grammar;
    sd_grammar_cursor *gcur;
    sd_grammar_gate gate;           /* the grammar acts only after this marker (n 0: from the start) */
    int32_t n_end;
    int32_t end[SPECDEC_MAX_EOS + SPECDEC_MAX_STOP_TOKEN_IDS];
} sd_logits_proc;

/* 1 if p asks for any processor (else the sequence's rows are processed as before). */
static inline int sd_logits_proc_wanted(const specdec_generate_params *p) {
    return p->n_logit_bias > 0 || p->min_tokens > 0 || p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f ||
           (p->repetition_penalty != 0.0f && p->repetition_penalty != 1.0f) || p->grammar || p->n_allowed_token_ids > 0 ||
           p->n_bad_words > 0;
}

#endif
