/* sd_generate.h — THE generation loop, per sequence (runtime/sd_generate.c). It alone
 * owns a sequence's budget (n_predict, the context), its stop conditions (EOS, stop
 * strings, the callback, a cancel flag), emission (the sequence, the output, the
 * streaming text) and statistics; one round of speculation is the round interface's
 * business (core/sd_round.h).
 *
 * One driver (runtime/sd_driver.h) runs these steps for the engine (specdec_generate,
 * this file's .c: one sequence) and the scheduler (many sequences on a shared round):
 * sd_gen_init, begin, then { sd_gen_plan each; one round; sd_gen_absorb each } until
 * plan says done, sd_gen_finish. Nothing here allocates. */
#ifndef SD_GENERATE_H
#define SD_GENERATE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "specdec.h"
#include "sd_adapt.h"
#include "sd_error.h"
#include "sd_grammar.h"
#include "sd_round.h"

/* Longest stop string accepted by specdec_generate (bytes). */
#define SD_ENGINE_MAX_STOP_LEN 512
/* Bytes of the text window a generation with stop strings needs. */
#define SD_GEN_TEXT_WIN (2 * SD_ENGINE_MAX_STOP_LEN)

/* Special ids a generation stops on / checks a draft against. */
typedef struct sd_engine_special {
    int32_t bos_id;                    /* -1 if none */
    int32_t n_eos;
    int32_t eos_ids[SPECDEC_MAX_EOS];
} sd_engine_special;

/* What a generation needs to know of the models it runs on. */
/* Most tokens a grammar may force in one round of plain decoding (jump-forward,
 * core/sd_round.c round_grammar_forced); drafters' chains are bounded by their own γ. */
#define SD_GEN_FORCED_MAX SPECDEC_MAX_DRAFT

typedef struct sd_gen_env {
    int32_t n_ctx;           /* context of every sequence */
    int32_t n_vocab;
    int has_draft;           /* a draft model: the "model" drafter */
    int has_eagle3;          /* the draft is a head runner (core/sd_eagle3.h): the "eagle3" drafter (not "model") */
    int has_mtp;             /* with has_eagle3: the head is an MTP layer (the "mtp" drafter, same code) */
    int32_t tree_fit;        /* most tree nodes one round of the model drafter may verify (one call of each runner) */
    int32_t tree_fit_solo;   /* the same for a drafter without a runner (one target call: max_batch - 1) */
    sd_engine_special special;
    double t_load_s;         /* loading the models + creating the engine/scheduler (stats.t_load_s) */
    sd_ngram_corpus *corpus; /* the n-gram drafter's cross-request corpus (engine_params.ngram_corpus_tokens;
                                owned by the engine / scheduler), NULL: none */
} sd_gen_env;

/* One sequence's generation. */
typedef struct sd_gen {
    const sd_gen_env *env;
    const specdec_generate_params *p;
    int32_t *seq;                  /* prompt + output: capacity n_prompt + min(n_predict, n_ctx - n_prompt) */
    int32_t *out;                  /* the output (may alias seq + n_prompt) */
    int32_t n_out;
    int32_t L;                     /* tokens in seq */
    char *text_win;                /* [SD_GEN_TEXT_WIN] tail of the decoded text (stop strings) */
    size_t win_len;
    sd_adapt *adapt;
    specdec_detok_stream *ds;      /* NULL without a tokenizer; owned by the driver */
    specdec_stop_reason reason;
    specdec_stats *st;
    sd_round_seq rs;               /* the sequence as the round sees it */
    sd_logits_proc proc;           /* its logits processors (rs.proc points here when any is asked for) */
    sd_grammar_cursor gcur;        /* with a grammar: the output's place in it (proc.gcur points here) */
    specdec_draft_method method;   /* who drafts (NONE: plain decoding) */
    sd_round_trace trace;          /* what the last round proposed (with a round callback) */
    int tree;                      /* a draft tree was asked for: its shape is `req` */
    sd_draft_shape req;
    int32_t gamma;                 /* the chain's γ (adaptive: the current one) */
    const atomic_int *cancel;      /* NULL, or a flag that stops generation at the next token */
    int cancelled;                 /* the cancel flag is what stopped it */
    sd_errbuf *err;                /* failures are recorded here */
    specdec_status status;         /* OK, or what failed (the driver sets it) */
    double t_start;
} sd_gen;

/* Buffers and borrowed objects of one generation (see sd_gen). */
typedef struct sd_gen_io {
    int32_t *seq, *out;
    char *text_win;                /* may be NULL without stop strings */
    sd_adapt *adapt;
    specdec_detok_stream *ds;
    specdec_stats *stats;
    sd_errbuf *err;
} sd_gen_io;

double sd_gen_now(void);

/* specdec_generate's argument checks (fn names the entry point in messages): the prompt
 * (NULL, empty, >= n_ctx: CONTEXT_FULL, ids outside the vocabulary) and the params
 * (n_predict, n_draft, verify, sampling, stop strings, draft_method and the n-gram
 * limits, tree, reserved fields). */
specdec_status sd_gen_check_prompt(const sd_gen_env *env, const int32_t *prompt, int32_t n_prompt, const char *fn,
                                   sd_errbuf *eb);
specdec_status sd_gen_check_params(const sd_gen_env *env, const specdec_generate_params *p, const char *fn,
                                   sd_errbuf *eb);

/* The drafter checked params ask for on env (*method; *out NULL: plain decoding):
 * AUTO the draft model when there is one, MODEL (needs one), NGRAM (ngram_min >= 1,
 * ngram_min <= ngram_max <= SD_NGRAM_MAX), NONE; EAGLE3 needs an EAGLE-3 head (env->has_eagle3:
 * AUTO picks it then, and MODEL is refused), MTP an MTP layer (env->has_mtp; AUTO picks it);
 * n_draft 0 without a tree is plain decoding. INVALID_ARGUMENT naming the field. */
specdec_status sd_gen_drafter(const sd_gen_env *env, const specdec_generate_params *p, const char *fn,
                              sd_drafter **out, specdec_draft_method *method, sd_errbuf *eb);

/* A seed from the OS's entropy (getrandom; the clock if that fails), < 2^32: what
 * SPECDEC_SEED_RANDOM becomes. */
uint64_t sd_gen_random_seed(void);

/* Start a checked generation: the prompt copied into io->seq, the round sequence
 * filled (identity, sampling, tokens, length); stats zeroed. The round's begin() is
 * the driver's next call. */
void sd_gen_init(sd_gen *g, const sd_gen_env *env, const specdec_generate_params *p, const int32_t *prompt,
                 int32_t n_prompt, const sd_gen_io *io);

/* 1 with the next round's shape in g->rs (depth 0: a plain step), or 0 when the
 * generation is over (g->reason says why). */
int sd_gen_plan(sd_gen *g);

/* After a successful round on rd: statistics, adaptive γ, the round callback, the
 * round's tokens emitted one by one until a stop (which settles rd at the emitted
 * length). */
specdec_status sd_gen_absorb(sd_gen *g, sd_round *rd);

/* The final flush of the streaming text (to the callback, token -1) and the
 * statistics; *n_out = tokens emitted. */
void sd_gen_finish(sd_gen *g, specdec_status st, int32_t *n_out);

#endif
