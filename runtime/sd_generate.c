/* sd_generate.c — THE generation loop (sd_generate.h): the per-sequence steps the
 * engine (specdec_generate, at the end of this file) and the scheduler both drive. It
 * alone owns the budget (n_predict, the context), the stop conditions (EOS, stop
 * strings, the callback, a cancel flag), emission (the sequence, the output, the
 * streaming text) and the statistics; one round of speculation is the round
 * protocol's business (core/sd_round.h), whichever executor runs it (host or CUDA
 * device-resident, one sequence or many) and whichever drafter proposes (its choice from
 * draft_method: sd_gen_drafter).
 *
 * Per round: γ is clipped so that every token the round may emit fits the budget and
 * the context (γ + 1 <= both); γ = 0 (no draft, n_draft == 0, or clipped to 0 at the
 * end of the budget) is a plain decoding step, which samples with the verifier's
 * target-side sampler, so "match" speculation reproduces plain decoding bit for bit.
 * A draft tree (tree_width / draft_nodes, docs/TREE.md) is clipped the same way
 * (runtime/sd_tree_shape.c); a tree a device executor does not take runs on the round's
 * fallback executor (the host one) within the same round. The shape is the most the
 * drafter may propose: the n-gram drafter may propose less, or nothing (a plain step).
 * The round's tokens are emitted one by one; a stop inside a round cuts it short and
 * the round settles both caches at the emitted length.
 *
 * Nothing is allocated per round (specdec_generate creates the streaming
 * detokenizer, when a tokenizer is passed, once per call before the loop). */
#define _DEFAULT_SOURCE /* clock_gettime(CLOCK_MONOTONIC), getrandom under -std=c11 */
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "sd_cpu_logprobs.h"
#include "sd_cpu_sample.h"
#include "sd_driver.h"
#include "sd_eagle3.h"
#include "sd_engine.h"
#include "sd_math.h"
#include "sd_tree_shape.h"

static double sd_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

specdec_generate_params specdec_generate_default_params(void) {
    specdec_generate_params p;
    memset(&p, 0, sizeof p);
    p.n_predict = 128;
    p.temperature = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    p.verify = SPECDEC_VERIFY_AUTO;
    p.n_draft = 4;
    p.draft_method = SPECDEC_DRAFT_AUTO;
    p.ngram_min = 1;
    p.ngram_max = 4;
    p.ngram_cost = SPECDEC_NGRAM_COST_MEASURED;
    p.ngram_token_cost = 0.0f;
    return p;
}

double sd_gen_now(void) { return sd_now(); }

const char *specdec_verify_mode_name(specdec_verify_mode mode) {
    static const char *const names[] = {"auto", "rejection", "greedy", "match"};
    return (unsigned)mode < sizeof names / sizeof names[0] ? names[mode] : "?";
}

const char *specdec_stop_reason_name(specdec_stop_reason reason) {
    static const char *const names[] = {"none", "n_predict", "eos", "stop_string", "callback", "context_full",
                                        "stop_token_id"};
    return (unsigned)reason < sizeof names / sizeof names[0] ? names[reason] : "?";
}

const char *specdec_draft_method_name(specdec_draft_method method) {
    static const char *const names[] = {"auto", "model", "ngram", "eagle3", "none", "mtp"};
    return (unsigned)method < sizeof names / sizeof names[0] ? names[method] : "?";
}

uint64_t sd_gen_random_seed(void) {
    uint32_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) == (ssize_t)sizeof r) return r;
    /* no entropy source: the clock through the splitmix64 finaliser */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    const uint64_t x = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec + 0x9e3779b97f4a7c15u;
    return sd_mix64(x) & 0xffffffffu;
}

/* ------------------------------------------------------------------------- */
/* request validation                                                         */
/* ------------------------------------------------------------------------- */
static specdec_status sd_gen_check_stops(const specdec_generate_params *p, int models_known, const char *fn,
                                         sd_errbuf *eb) {
    if (p->n_stop_strings < 0 || (p->n_stop_strings > 0 && !p->stop_strings))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: n_stop_strings %d with stop_strings %s", fn,
                       (int)p->n_stop_strings, p->stop_strings ? "set" : "NULL");
    if (models_known && p->n_stop_strings > 0 && !p->tokenizer)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: stop strings need params.tokenizer", fn);
    for (int32_t i = 0; i < p->n_stop_strings; i++) {
        const char *s = p->stop_strings[i];
        size_t n = s ? strlen(s) : 0;
        if (n == 0 || n > SD_ENGINE_MAX_STOP_LEN)
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: stop_strings[%d] is %s (1..%d bytes)", fn, (int)i,
                           !s ? "NULL" : n == 0 ? "empty" : "too long", SD_ENGINE_MAX_STOP_LEN);
    }
    return SPECDEC_OK;
}

/* The log-probability fields (docs/LOGPROBS.md). */
static specdec_status sd_gen_check_logprobs(const specdec_generate_params *p, const char *fn, sd_errbuf *eb) {
    if (p->logprobs != 0 && p->logprobs != 1)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: logprobs %d must be 0 or 1", fn, (int)p->logprobs);
    if (p->top_logprobs < 0 || p->top_logprobs > SPECDEC_MAX_TOP_LOGPROBS)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: top_logprobs %d outside [0, %d]", fn,
                       (int)p->top_logprobs, SPECDEC_MAX_TOP_LOGPROBS);
    if (p->top_logprobs > 0 && !p->logprobs)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: top_logprobs %d needs logprobs = 1 (logprobs is 0)", fn,
                       (int)p->top_logprobs);
    if (p->logprobs && !p->logprob_callback)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: logprobs = 1 needs logprob_callback (it is NULL)", fn);
    if (p->prompt_logprobs != 0 && p->prompt_logprobs != 1)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: prompt_logprobs %d must be 0 or 1", fn,
                       (int)p->prompt_logprobs);
    if (p->prompt_top_logprobs < 0 || p->prompt_top_logprobs > SPECDEC_MAX_TOP_LOGPROBS)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: prompt_top_logprobs %d outside [0, %d]", fn,
                       (int)p->prompt_top_logprobs, SPECDEC_MAX_TOP_LOGPROBS);
    if (p->prompt_top_logprobs > 0 && !p->prompt_logprobs)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT,
                       "%s: prompt_top_logprobs %d needs prompt_logprobs = 1 (prompt_logprobs is 0)", fn,
                       (int)p->prompt_top_logprobs);
    if (p->prompt_logprobs && !p->logprob_callback)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: prompt_logprobs = 1 needs logprob_callback (it is NULL)",
                       fn);
    return SPECDEC_OK;
}


/* The n-gram fields: lookup limits and cost (checked only when the n-gram drafter is asked for). */
static specdec_status sd_gen_check_ngram(const specdec_generate_params *p, const char *fn, sd_errbuf *eb) {
    if (p->ngram_min < 1)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: ngram_min %d must be >= 1", fn, (int)p->ngram_min);
    if (p->ngram_max < p->ngram_min)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: ngram_max %d < ngram_min %d", fn, (int)p->ngram_max,
                       (int)p->ngram_min);
    if (p->ngram_max > SD_NGRAM_MAX)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: ngram_max %d > %d", fn, (int)p->ngram_max, SD_NGRAM_MAX);
    if (p->adaptive_draft)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: adaptive_draft applies to the model drafter, not NGRAM",
                       fn);
    if ((int)p->ngram_cost < SPECDEC_NGRAM_COST_MEASURED || (int)p->ngram_cost > SPECDEC_NGRAM_COST_FIXED)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: unknown ngram_cost %d", fn, (int)p->ngram_cost);
    if (!(p->ngram_token_cost >= 0.0f && p->ngram_token_cost <= 100.0f))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: ngram_token_cost %g outside [0, 100]", fn,
                       (double)p->ngram_token_cost);
    return SPECDEC_OK;
}

specdec_status sd_gen_drafter(const sd_gen_env *env, const specdec_generate_params *p, const char *fn,
                              sd_drafter **out, specdec_draft_method *method, sd_errbuf *eb) {
    specdec_draft_method m = p->draft_method;
    *out = NULL;
    *method = SPECDEC_DRAFT_NONE;
    const char *head = env->has_mtp ? "an MTP layer" : "an EAGLE-3 head";
    if (m == SPECDEC_DRAFT_AUTO)
        m = env->has_mtp      ? SPECDEC_DRAFT_MTP
            : env->has_eagle3 ? SPECDEC_DRAFT_EAGLE3
            : env->has_draft  ? SPECDEC_DRAFT_MODEL
                              : SPECDEC_DRAFT_NONE;
    switch (m) {
    case SPECDEC_DRAFT_MODEL:
        if (env->has_eagle3)
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: draft_method MODEL, but the draft is %s", fn, head);
        if (!env->has_draft)
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: draft_method MODEL needs a draft model", fn);
        *out = sd_drafter_model();
        break;
    case SPECDEC_DRAFT_NGRAM: {
        const specdec_status st = sd_gen_check_ngram(p, fn, eb);
        if (st != SPECDEC_OK) return st;
        *out = sd_drafter_ngram();
        break;
    }
    case SPECDEC_DRAFT_EAGLE3:
    case SPECDEC_DRAFT_MTP: {
        const int want_mtp = m == SPECDEC_DRAFT_MTP;
        if (!env->has_eagle3 || env->has_mtp != want_mtp)
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: draft_method %s needs %s as the draft%s", fn,
                           want_mtp ? "MTP" : "EAGLE3",
                           want_mtp ? "an MTP layer (a model loaded with specdec_model_params.mtp)" : "an EAGLE-3 head",
                           env->has_eagle3 ? (env->has_mtp ? ", and the draft is an MTP layer (draft_method MTP)"
                                                           : ", and the draft is an EAGLE-3 head (draft_method EAGLE3)")
                           : env->has_draft ? ", and the draft is a draft model (draft_method MODEL)"
                                            : " (none given)");
        *out = want_mtp ? sd_drafter_mtp() : sd_drafter_eagle3();
        break;
    }
    case SPECDEC_DRAFT_NONE: break;
    default:
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: unknown draft_method %d", fn, (int)p->draft_method);
    }
    int tree = 0;
    sd_draft_shape req;
    const specdec_status st = sd_tree_request(p, *out != NULL, &req, &tree, eb);
    if (st != SPECDEC_OK) return st;
    if (p->n_draft == 0 && !tree) *out = NULL; /* n_draft 0: plain decoding even with a drafter */
    *method = *out ? (*out)->ops->method : SPECDEC_DRAFT_NONE;
    return SPECDEC_OK;
}

/* allowed_token_ids and bad_words (since 0.5.2); ids against the vocabulary when known. */
static specdec_status sd_gen_check_masks(const sd_gen_env *env, const specdec_generate_params *p, int models_known,
                                         const char *fn, sd_errbuf *eb) {
    const int32_t V = models_known ? env->n_vocab : INT32_MAX;
    const char *range = models_known ? "outside the vocabulary" : "negative";
    if (p->n_allowed_token_ids < 0 || p->n_allowed_token_ids > SPECDEC_MAX_ALLOWED_TOKEN_IDS ||
        (p->n_allowed_token_ids > 0) != (p->allowed_token_ids != NULL))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: n_allowed_token_ids %d (0..%d) with allowed_token_ids %s", fn,
                       (int)p->n_allowed_token_ids, SPECDEC_MAX_ALLOWED_TOKEN_IDS, p->allowed_token_ids ? "set" : "NULL");
    for (int32_t i = 0; i < p->n_allowed_token_ids; i++)
        if (p->allowed_token_ids[i] < 0 || p->allowed_token_ids[i] >= V)
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: allowed_token_ids[%d] = %d %s", fn, (int)i,
                           (int)p->allowed_token_ids[i], range);
    if (p->n_bad_words < 0 || p->n_bad_words > SPECDEC_MAX_BAD_WORDS ||
        (p->n_bad_words > 0 && (!p->bad_words_ids || !p->bad_words_offsets)) ||
        (p->n_bad_words == 0 && (p->bad_words_ids || p->bad_words_offsets)))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT,
                       "%s: n_bad_words %d (0..%d) with bad_words_ids %s and bad_words_offsets %s", fn, (int)p->n_bad_words,
                       SPECDEC_MAX_BAD_WORDS, p->bad_words_ids ? "set" : "NULL", p->bad_words_offsets ? "set" : "NULL");
    /* grammar_after_tokens (since 0.5.4): a marker for a grammar */
    if (p->n_grammar_after_tokens < 0 || p->n_grammar_after_tokens > SPECDEC_MAX_GRAMMAR_AFTER_TOKENS ||
        (p->n_grammar_after_tokens > 0) != (p->grammar_after_tokens != NULL) || (p->n_grammar_after_tokens > 0 && !p->grammar))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT,
                       "%s: n_grammar_after_tokens %d (0..%d) with grammar_after_tokens %s and grammar %s", fn,
                       (int)p->n_grammar_after_tokens, SPECDEC_MAX_GRAMMAR_AFTER_TOKENS,
                       p->grammar_after_tokens ? "set" : "NULL", p->grammar ? "set" : "NULL (needed)");
    for (int32_t i = 0; i < p->n_grammar_after_tokens; i++)
        if (p->grammar_after_tokens[i] < 0 || p->grammar_after_tokens[i] >= V)
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: grammar_after_tokens[%d] = %d %s", fn, (int)i,
                           (int)p->grammar_after_tokens[i], range);
    if (p->n_bad_words == 0) return SPECDEC_OK;
    if (p->bad_words_offsets[0] != 0)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: bad_words_offsets[0] = %d must be 0", fn,
                       (int)p->bad_words_offsets[0]);
    for (int32_t i = 0; i < p->n_bad_words; i++) {
        const int32_t a = p->bad_words_offsets[i], b = p->bad_words_offsets[i + 1];
        if (b <= a || b > SPECDEC_MAX_BAD_WORDS_TOKENS)
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT,
                           "%s: bad_words_offsets[%d] = %d after %d: sequences are not empty and hold at most %d ids in all",
                           fn, (int)i + 1, (int)b, (int)a, SPECDEC_MAX_BAD_WORDS_TOKENS);
        for (int32_t j = a; j < b; j++)
            if (p->bad_words_ids[j] < 0 || p->bad_words_ids[j] >= V)
                return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: bad_words_ids[%d] = %d (bad word %d) %s", fn, (int)j,
                               (int)p->bad_words_ids[j], (int)i, range);
    }
    return SPECDEC_OK;
}

/* The logits processors' fields (since 0.5) and the reserved space; token ids against the
 * vocabulary when the models are known. */
static specdec_status sd_gen_check_proc(const sd_gen_env *env, const specdec_generate_params *p, int models_known,
                                        const char *fn, sd_errbuf *eb) {
    if (p->n_logit_bias < 0 || p->n_logit_bias > SPECDEC_MAX_LOGIT_BIAS || (p->n_logit_bias > 0 && !p->logit_bias))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: n_logit_bias %d (0..%d) with logit_bias %s", fn,
                       (int)p->n_logit_bias, SPECDEC_MAX_LOGIT_BIAS, p->logit_bias ? "set" : "NULL");
    for (int32_t i = 0; i < p->n_logit_bias; i++) {
        const specdec_logit_bias *b = &p->logit_bias[i];
        if (b->token < 0 || (models_known && b->token >= env->n_vocab))
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: logit_bias[%d].token %d outside the vocabulary%s", fn,
                           (int)i, (int)b->token, models_known ? "" : " (< 0)");
        if (!(b->bias >= -100.0f && b->bias <= 100.0f))
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: logit_bias[%d].bias %g outside [-100, 100]", fn, (int)i,
                           (double)b->bias);
    }
    if (p->min_tokens < 0)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: min_tokens %d must be >= 0", fn, (int)p->min_tokens);
    if (p->n_stop_token_ids < 0 || p->n_stop_token_ids > SPECDEC_MAX_STOP_TOKEN_IDS ||
        (p->n_stop_token_ids > 0 && !p->stop_token_ids))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: n_stop_token_ids %d (0..%d) with stop_token_ids %s", fn,
                       (int)p->n_stop_token_ids, SPECDEC_MAX_STOP_TOKEN_IDS, p->stop_token_ids ? "set" : "NULL");
    for (int32_t i = 0; i < p->n_stop_token_ids; i++)
        if (p->stop_token_ids[i] < 0 || (models_known && p->stop_token_ids[i] >= env->n_vocab))
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: stop_token_ids[%d] = %d outside the vocabulary", fn,
                           (int)i, (int)p->stop_token_ids[i]);
    if (!(p->presence_penalty >= -2.0f && p->presence_penalty <= 2.0f))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: presence_penalty %g outside [-2, 2]", fn,
                       (double)p->presence_penalty);
    if (!(p->frequency_penalty >= -2.0f && p->frequency_penalty <= 2.0f))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: frequency_penalty %g outside [-2, 2]", fn,
                       (double)p->frequency_penalty);
    if (!(p->repetition_penalty == 0.0f || (p->repetition_penalty > 0.0f && p->repetition_penalty <= 100.0f)))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: repetition_penalty %g: 0 (off) or in (0, 100]", fn,
                       (double)p->repetition_penalty);
    const specdec_status st = sd_gen_check_masks(env, p, models_known, fn, eb);
    if (st != SPECDEC_OK) return st;
    for (size_t i = 0; i < sizeof p->reserved_i / sizeof p->reserved_i[0]; i++)
        if (p->reserved_i[i])
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: reserved_i[%zu] = %d must be zero", fn, i,
                           (int)p->reserved_i[i]);
    for (size_t i = 0; i < sizeof p->reserved / sizeof p->reserved[0]; i++)
        if (p->reserved[i])
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: reserved[%zu] must be zero", fn, i);
    return SPECDEC_OK;
}

/* The params' checks; models_known 0 (specdec_generate_params_validate): only what does
 * not depend on the models and the tokenizer (env->has_draft is taken as 1). */
static specdec_status sd_gen_check_params_ex(const sd_gen_env *env, const specdec_generate_params *p,
                                            int models_known, const char *fn, sd_errbuf *eb) {
    if (p->n_predict < 0 || (p->n_predict == 0 && p->prompt_logprobs != 1))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: n_predict %d must be > 0 (0 only with prompt_logprobs = 1)",
                       fn, (int)p->n_predict);
    if (p->n_draft < 0 || p->n_draft > SPECDEC_MAX_DRAFT)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: n_draft %d outside [0, %d]", fn, (int)p->n_draft,
                       SPECDEC_MAX_DRAFT);
    if (models_known && p->adaptive_draft && env->has_draft && p->n_draft == 0)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: adaptive_draft needs a starting n_draft in [1, %d], got 0",
                       fn, SPECDEC_MAX_DRAFT);
    if ((int)p->verify < SPECDEC_VERIFY_AUTO || (int)p->verify > SPECDEC_VERIFY_MATCH)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: unknown verify mode %d", fn, (int)p->verify);
    sd_sampling_params sp = sd_sampling_params_from(p);
    sd_drafter *dr;
    specdec_draft_method m;
    specdec_status st = sd_sampling_check_params(&sp, eb);
    if (st == SPECDEC_OK) st = sd_gen_check_stops(p, models_known, fn, eb);
    if (st == SPECDEC_OK) st = sd_gen_check_logprobs(p, fn, eb);
    if (st == SPECDEC_OK) st = sd_gen_check_proc(env, p, models_known, fn, eb);
    if (st == SPECDEC_OK) st = sd_gen_drafter(env, p, fn, &dr, &m, eb);
    return st;
}

specdec_status sd_gen_check_params(const sd_gen_env *env, const specdec_generate_params *p, const char *fn,
                                   sd_errbuf *eb) {
    return sd_gen_check_params_ex(env, p, 1, fn, eb);
}

specdec_status specdec_generate_params_validate(const specdec_generate_params *params) {
    const char *fn = "specdec_generate_params_validate";
    if (!params) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "%s: params is NULL", fn);
    sd_gen_env env;
    memset(&env, 0, sizeof env);
    env.has_draft = 1;
    /* the draft is unknown: what the method needs */
    env.has_eagle3 = params->draft_method == SPECDEC_DRAFT_EAGLE3 || params->draft_method == SPECDEC_DRAFT_MTP;
    env.has_mtp = params->draft_method == SPECDEC_DRAFT_MTP;
    return sd_gen_check_params_ex(&env, params, 0, fn, NULL);
}

specdec_status sd_gen_check_prompt(const sd_gen_env *env, const int32_t *prompt, int32_t n_prompt, const char *fn,
                                   sd_errbuf *eb) {
    if (!prompt) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: prompt is NULL", fn);
    if (n_prompt <= 0)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: empty prompt (n_prompt %d)", fn, (int)n_prompt);
    if (n_prompt >= env->n_ctx)
        return sd_fail(eb, SPECDEC_ERR_CONTEXT_FULL, "%s: prompt of %d tokens leaves no room in the context of %d tokens",
                       fn, (int)n_prompt, (int)env->n_ctx);
    for (int32_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= env->n_vocab)
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: prompt[%d] = %d outside [0, %d)", fn, (int)i,
                           (int)prompt[i], (int)env->n_vocab);
    return SPECDEC_OK;
}

/* ------------------------------------------------------------------------- */
/* emission and stop conditions                                               */
/* ------------------------------------------------------------------------- */
/* Slide `b` into the text window; 1 if a stop string now ends at it. The window keeps
 * the last SD_ENGINE_MAX_STOP_LEN-1 bytes before each new byte, enough for any stop
 * string to be matched across token boundaries. */
static int sd_gen_text_byte(sd_gen *g, char b) {
    char *w = g->text_win;
    if (g->win_len == SD_GEN_TEXT_WIN) {
        memmove(w, w + g->win_len - (SD_ENGINE_MAX_STOP_LEN - 1), SD_ENGINE_MAX_STOP_LEN - 1);
        g->win_len = SD_ENGINE_MAX_STOP_LEN - 1;
    }
    w[g->win_len++] = b;
    for (int32_t i = 0; i < g->p->n_stop_strings; i++) {
        const char *s = g->p->stop_strings[i];
        size_t n = strlen(s);
        if (n <= g->win_len && w[g->win_len - 1] == s[n - 1] && !memcmp(w + g->win_len - n, s, n)) return 1;
    }
    return 0;
}

static int sd_is_eos(const sd_engine_special *sp, int32_t tok) {
    for (int32_t i = 0; i < sp->n_eos; i++)
        if (sp->eos_ids[i] == tok) return 1;
    return 0;
}

/* A record to logprob_callback; 1 if it asks to stop. pos: the token's absolute position. */
static int sd_gen_logprob_send(const sd_gen *g, const sd_logprob *lp, int64_t pos) {
    specdec_token_logprobs v;
    v.token = lp->token;
    v.logprob = lp->logprob;
    v.rank = lp->rank;
    v.n_top = lp->n_top;
    v.top_tokens = lp->top_tokens;
    v.top_logprobs = lp->top_logprobs;
    v.position = pos;
    return g->p->logprob_callback(g->p->logprob_user_data, &v) != 0;
}

/* The token's log-probabilities (before `callback` of the same token); 1 if it asks to stop. */
static int sd_gen_logprob_stop(const sd_gen *g, const sd_logprob *lp, int64_t pos) {
    return g->p->logprobs && lp ? sd_gen_logprob_send(g, lp, pos) : 0;
}

/* The round's prompt rows (sd_round_seq.prompt_rows, during begin): the record of each
 * prompt token p + 1 from row p, in order, until the callback or the cancel flag stops it
 * (reason CALLBACK; the rest of the prefill runs, nothing more is reported). */
static void sd_gen_prompt_rows(void *ctx, const float *rows, int32_t n_vocab, int32_t first, int32_t n) {
    sd_gen *g = ctx;
    for (int32_t i = 0; i < n && g->reason == SPECDEC_STOP_NONE; i++) {
        const int64_t pos = (int64_t)first + i + 1;
        sd_logprob lp;
        sd_cpu_logprobs(rows + (size_t)i * (size_t)n_vocab, n_vocab, g->seq[pos], g->p->prompt_top_logprobs, &lp);
        int stop = sd_gen_logprob_send(g, &lp, pos);
        if (!stop && g->cancel && atomic_load_explicit(g->cancel, memory_order_acquire)) stop = g->cancelled = 1;
        if (stop) g->reason = SPECDEC_STOP_CALLBACK;
    }
}

/* The callbacks and the cancel flag: 1 if any stops generation after this token. */
static int sd_gen_callback_stop(sd_gen *g, int32_t tok, const sd_logprob *lp, const char *piece, size_t plen) {
    int stop = sd_gen_logprob_stop(g, lp, (int64_t)g->L - 1);
    if (g->p->callback && g->p->callback(g->p->user_data, tok, g->ds ? (piece ? piece : "") : NULL, plen)) stop = 1;
    if (!stop && g->cancel && atomic_load_explicit(g->cancel, memory_order_acquire)) {
        g->cancelled = 1;
        stop = 1;
    }
    return stop;
}

/* Append one token to the output and decide whether generation stops after it
 * (g->reason). Priority when several apply: EOS, stop string, callback (or cancel),
 * n_predict, context full. */
static specdec_status sd_gen_emit(sd_gen *g, int32_t tok, const sd_logprob *lp) {
    if (g->n_out == 0) g->st->t_first_token_s = sd_now() - g->t_start;
    g->seq[g->L++] = tok;
    g->out[g->n_out++] = tok;
    const char *piece = NULL;
    size_t plen = 0;
    if (g->ds) {
        specdec_status st = specdec_detok_stream_push(g->ds, tok, &piece, &plen);
        if (st != SPECDEC_OK)
            return sd_fail(g->err, st, "decoding generated token %d to text: %s", (int)tok, specdec_last_error());
    }
    specdec_stop_reason r = SPECDEC_STOP_NONE;
    if (!g->p->ignore_eos && sd_is_eos(&g->env->special, tok)) r = SPECDEC_STOP_EOS;
    for (int32_t i = 0; i < g->p->n_stop_token_ids && r == SPECDEC_STOP_NONE; i++)
        if (g->p->stop_token_ids[i] == tok) r = SPECDEC_STOP_TOKEN_ID;
    if (g->p->n_stop_strings > 0) {
        int hit = 0;
        for (size_t i = 0; i < plen; i++) hit |= sd_gen_text_byte(g, piece[i]);
        if (hit && r == SPECDEC_STOP_NONE) r = SPECDEC_STOP_STRING;
    }
    if (sd_gen_callback_stop(g, tok, lp, piece, plen) && r == SPECDEC_STOP_NONE) r = SPECDEC_STOP_CALLBACK;
    if (r != SPECDEC_STOP_CALLBACK) g->cancelled = 0;
    if (r == SPECDEC_STOP_NONE && g->n_out >= g->p->n_predict) r = SPECDEC_STOP_N_PREDICT;
    if (r == SPECDEC_STOP_NONE && g->L >= g->env->n_ctx) r = SPECDEC_STOP_CONTEXT_FULL;
    g->reason = r;
    return SPECDEC_OK;
}

/* ------------------------------------------------------------------------- */
/* the per-sequence steps                                                     */
/* ------------------------------------------------------------------------- */
/* What the statistics say about the run's settings, as used (include/specdec.h). */
static void sd_gen_stats_init(sd_gen *g, int32_t n_prompt) {
    specdec_stats *st = g->st;
    const specdec_generate_params *p = g->p;
    st->n_prompt = n_prompt;
    st->t_load_s = g->env->t_load_s;
    st->seed = g->rs.seed;
    st->verify = g->rs.mode;
    st->draft_method = g->method;
    if (!g->rs.drafter) return;
    if (g->tree) {
        memcpy(st->tree_width, p->tree_width, sizeof st->tree_width);
        st->draft_nodes = p->draft_nodes;
    } else {
        st->n_draft = p->n_draft;
        st->adaptive_draft = p->adaptive_draft != 0;
    }
}

/* The sequence's logits processors (core/sd_logits_proc.h) from its params. */
static void sd_gen_proc_init(sd_gen *g, int32_t n_prompt) {
    const specdec_generate_params *p = g->p;
    sd_logits_proc *lp = &g->proc;
    lp->bias = p->logit_bias;
    lp->n_bias = p->n_logit_bias;
    lp->min_tokens = p->min_tokens;
    lp->n_ban = 0;
    for (int32_t i = 0; i < g->env->special.n_eos && !p->ignore_eos; i++) lp->ban[lp->n_ban++] = g->env->special.eos_ids[i];
    for (int32_t i = 0; i < p->n_stop_token_ids; i++) lp->ban[lp->n_ban++] = p->stop_token_ids[i];
    lp->presence = p->presence_penalty;
    lp->frequency = p->frequency_penalty;
    lp->repetition = p->repetition_penalty == 0.0f ? 1.0f : p->repetition_penalty;
    lp->n_prompt = n_prompt;
    lp->allowed = p->allowed_token_ids;
    lp->n_allowed = p->n_allowed_token_ids;
    lp->bad_ids = p->bad_words_ids;
    lp->bad_offsets = p->bad_words_offsets;
    lp->n_bad = p->n_bad_words;
    lp->grammar = p->grammar;
    lp->n_end = 0;
    if (p->grammar) {
        for (int32_t i = 0; i < g->env->special.n_eos; i++) lp->end[lp->n_end++] = g->env->special.eos_ids[i];
        for (int32_t i = 0; i < p->n_stop_token_ids; i++) lp->end[lp->n_end++] = p->stop_token_ids[i];
        lp->gate = (sd_grammar_gate){p->grammar_after_tokens, p->n_grammar_after_tokens}; /* since 0.5.4 */
        g->gcur = (sd_grammar_cursor){0, sd_grammar_initial(p->grammar, &lp->gate)};
        lp->gcur = &g->gcur;
    }
    g->rs.proc = lp;
}

void sd_gen_init(sd_gen *g, const sd_gen_env *env, const specdec_generate_params *p, const int32_t *prompt,
                 int32_t n_prompt, const sd_gen_io *io) {
    memset(g, 0, sizeof *g);
    memset(io->stats, 0, sizeof *io->stats);
    memset(io->adapt, 0, sizeof *io->adapt);
    g->t_start = sd_now();
    g->env = env;
    g->p = p;
    g->seq = io->seq;
    g->out = io->out;
    g->text_win = io->text_win;
    g->adapt = io->adapt;
    g->ds = io->ds;
    g->st = io->stats;
    g->err = io->err;
    sd_round_seq *s = &g->rs;
    (void)sd_gen_drafter(env, p, "", &s->drafter, &g->method, NULL); /* checked by the caller */
    (void)sd_tree_request(p, s->drafter != NULL, &g->req, &g->tree, NULL);
    g->gamma = s->drafter && p->n_draft > 0 ? p->n_draft : 0;
    s->ngram_min = p->ngram_min;
    s->ngram_max = p->ngram_max;
    s->ngram = g->method == SPECDEC_DRAFT_NGRAM ? &g->adapt->ngram : NULL;
    s->corpus = g->method == SPECDEC_DRAFT_NGRAM ? env->corpus : NULL;
    s->trace = p->round_callback ? &g->trace : NULL;
    s->logprobs = p->logprobs;
    s->top_logprobs = p->top_logprobs;
    if (p->prompt_logprobs && n_prompt > 1) { /* cleared by the driver once begun */
        s->prompt_rows = sd_gen_prompt_rows;
        s->prompt_ctx = g;
    }
    s->seed = p->seed == SPECDEC_SEED_RANDOM ? sd_gen_random_seed() : p->seed;
    s->sequence_id = p->sequence_id;
    s->mode = p->verify;
    if (s->mode == SPECDEC_VERIFY_AUTO) s->mode = p->temperature == 0.0f ? SPECDEC_VERIFY_GREEDY : SPECDEC_VERIFY_REJECTION;
    s->sp = s->mode == SPECDEC_VERIFY_GREEDY ? sd_rule_greedy_params() : sd_sampling_params_from(p);
    if (sd_logits_proc_wanted(p)) sd_gen_proc_init(g, n_prompt);
    memmove(g->seq, prompt, (size_t)n_prompt * sizeof(int32_t));
    g->L = n_prompt;
    s->tokens = g->seq;
    s->length = n_prompt;
    sd_gen_stats_init(g, n_prompt);
}

/* The shape of the next round: every emitted token must fit the budget and the
 * context (depth + 1 <= both); a tree also its nodes in the caches and one call. */
static sd_draft_shape sd_gen_round_shape(const sd_gen *g) {
    const sd_gen_env *env = g->env;
    const int32_t room = sd_min_i32(g->p->n_predict - g->n_out - 1, env->n_ctx - g->L - 1);
    if (!g->rs.drafter) { /* plain decoding; with a grammar, the tokens it forces are verified in one pass */
        const int32_t fit = sd_min_i32(SD_GEN_FORCED_MAX, env->tree_fit_solo);
        return sd_draft_chain(g->p->grammar && room > 0 && fit > 0 ? sd_min_i32(fit, room) : 0);
    }
    if (!g->tree) return sd_draft_chain(room < 0 ? 0 : sd_min_i32(g->gamma, room));
    const int32_t fit = g->rs.drafter->ops->caps & SD_DRAFTER_RUNNER ? env->tree_fit : env->tree_fit_solo;
    return sd_tree_round_shape(&g->req, room, sd_min_i32(env->n_ctx - g->L, fit));
}

int sd_gen_plan(sd_gen *g) {
    if (g->reason != SPECDEC_STOP_NONE) return 0;
    if (g->n_out >= g->p->n_predict) g->reason = SPECDEC_STOP_N_PREDICT;
    else if (g->L >= g->env->n_ctx) g->reason = SPECDEC_STOP_CONTEXT_FULL;
    if (g->reason != SPECDEC_STOP_NONE) return 0;
    g->rs.shape = sd_gen_round_shape(g);
    g->rs.length = g->L;
    if (g->rs.ngram) sd_adapt_ngram_prepare(g->adapt, g->p->ngram_cost, g->p->ngram_token_cost);
    return 1;
}

/* The statistics of one round, and what adaptive γ learns from it (model chains). */
static void sd_gen_account(sd_gen *g) {
    const sd_round_seq *s = &g->rs;
    g->st->t_draft_s += s->t.draft;
    g->st->t_target_s += s->t.target;
    g->st->t_verify_s += s->t.verify;
    g->st->n_rounds++;
    g->st->n_target_passes++;
    g->st->n_forced += s->n_forced;
    if (s->ngram) sd_adapt_ngram_observe(g->adapt, s->n_drafted + 1, s->t.draft + s->t.target + s->t.verify);
    if (s->depth > 0) {
        g->st->n_draft_rounds++;
        g->st->n_drafted += s->n_drafted;
        g->st->n_accepted += s->n_accepted;
        for (int32_t i = 0; i < s->depth && i < SPECDEC_MAX_DRAFT; i++) {
            g->st->n_drafted_at_pos[i]++;
            g->st->n_accepted_at_pos[i] += i < s->n_accepted;
        }
        if (!g->tree && g->method == SPECDEC_DRAFT_MODEL)
            sd_adapt_observe(g->adapt, s->depth, s->n_accepted, s->t.draft, s->t.target);
    }
}

/* The round callback: what the round proposed, accepted and emitted. */
static void sd_gen_trace(sd_gen *g, int32_t n_emitted) {
    const sd_round_seq *s = &g->rs;
    specdec_round_info info;
    info.round = (int32_t)(g->st->n_rounds - 1);
    info.draft_method = s->depth > 0 ? g->method : SPECDEC_DRAFT_NONE;
    info.n_drafted = s->depth > 0 ? g->trace.n : 0;
    info.draft_tokens = g->trace.token;
    info.draft_parents = g->trace.parent;
    info.n_accepted = s->n_accepted;
    info.accepted_nodes = g->trace.path;
    info.n_emitted = n_emitted;
    info.emitted = s->out;
    g->p->round_callback(g->p->round_user_data, &info);
}

specdec_status sd_gen_absorb(sd_gen *g, sd_round *rd) {
    sd_round_seq *s = &g->rs;
    if (s->n_accepted < 0 || s->n_accepted > s->depth || s->depth > s->shape.depth)
        return sd_fail(g->err, SPECDEC_ERR_INTERNAL, "round accepted %d of depth %d (shape %d)", (int)s->n_accepted,
                       (int)s->depth, (int)s->shape.depth);
    sd_gen_account(g);
    specdec_status st = SPECDEC_OK;
    int32_t i = 0;
    for (; i <= s->n_accepted && g->reason == SPECDEC_STOP_NONE; i++)
        if ((st = sd_gen_emit(g, s->out[i], s->logprobs ? &s->lp[i] : NULL)) != SPECDEC_OK) return st;
    if (i <= s->n_accepted && (st = sd_round_settle(rd, s, g->L)) != SPECDEC_OK)
        return sd_fail(g->err, st, "%s", sd_round_err(rd));
    if (g->p->round_callback) sd_gen_trace(g, i);
    if (s->depth > 0 && g->p->adaptive_draft && !g->tree && g->method == SPECDEC_DRAFT_MODEL)
        g->gamma = sd_adapt_choose_gamma(g->adapt, g->gamma, SPECDEC_MAX_DRAFT);
    return SPECDEC_OK;
}

void sd_gen_finish(sd_gen *g, specdec_status st, int32_t *n_out) {
    const specdec_generate_params *p = g->p;
    specdec_stats *stats = g->st;
    if (g->ds) {
        /* held-back bytes (an incomplete UTF-8 tail) go to the callback as token -1 */
        const char *text = NULL;
        size_t len = 0;
        if (st == SPECDEC_OK && specdec_detok_stream_flush(g->ds, &text, &len) == SPECDEC_OK && len > 0 && p->callback)
            (void)p->callback(p->user_data, -1, text, len);
    }
    *n_out = g->n_out;
    if (g->env->corpus) /* whatever drafted it, the generation joins the corpus the n-gram drafter searches */
        sd_ngram_corpus_add(g->env->corpus, g->seq, g->L - g->n_out, g->L);
    stats->n_generated = g->n_out;
    stats->acceptance_rate = stats->n_drafted ? (double)stats->n_accepted / (double)stats->n_drafted : 0.0;
    stats->tokens_per_round = stats->n_rounds ? (double)stats->n_generated / (double)stats->n_rounds : 0.0;
    stats->t_total_s = sd_now() - g->t_start;
    double t_gen = stats->t_total_s - stats->t_prefill_s;
    stats->tokens_per_second = t_gen > 0 ? (double)stats->n_generated / t_gen : 0.0;
    stats->final_n_draft = g->tree ? g->req.depth : g->gamma;
    if (stats->n_draft_rounds > 0) {
        stats->mean_accepted_length = (double)stats->n_accepted / (double)stats->n_draft_rounds;
        stats->nodes_per_round = (double)stats->n_drafted / (double)stats->n_draft_rounds;
    }
    stats->prompt_tokens_per_second = stats->t_prefill_s > 0 ? (double)stats->n_prompt / stats->t_prefill_s : 0.0;
    stats->tokens_per_target_pass =
        stats->n_target_passes ? (double)stats->n_generated / (double)stats->n_target_passes : 0.0;
    for (int i = 0; i < SPECDEC_MAX_DRAFT; i++)
        stats->acceptance_at_pos[i] = stats->n_drafted_at_pos[i]
                                          ? (double)stats->n_accepted_at_pos[i] / (double)stats->n_drafted_at_pos[i]
                                          : 0.0;
    stats->stop_reason = g->reason;
}

/* ------------------------------------------------------------------------- */
/* specdec_generate: one sequence on an engine                                */
/* ------------------------------------------------------------------------- */
static specdec_status sd_gen_check(const specdec_engine *e, const int32_t *prompt, int32_t n_prompt,
                                   const specdec_generate_params *p, const int32_t *out_tokens, int32_t out_capacity,
                                   const int32_t *n_out, sd_errbuf *eb) {
    const char *fn = "specdec_generate";
    if (!out_tokens || !n_out)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, !out_tokens ? "out_tokens" : "n_out");
    specdec_status st = sd_gen_check_prompt(&e->env, prompt, n_prompt, fn, eb);
    if (st == SPECDEC_OK) st = sd_gen_check_params(&e->env, p, fn, eb);
    if (st != SPECDEC_OK) return st;
    int64_t room = (int64_t)e->n_ctx - n_prompt;
    int64_t need = p->n_predict < room ? p->n_predict : room;
    if (out_capacity < need)
        return sd_fail(eb, SPECDEC_ERR_BUFFER_TOO_SMALL,
                       "%s: out_capacity %d < %lld (min(n_predict %d, n_ctx %d - n_prompt %d))", fn, (int)out_capacity,
                       (long long)need, (int)p->n_predict, (int)e->n_ctx, (int)n_prompt);
    return SPECDEC_OK;
}

static specdec_status sd_generate_locked(specdec_engine *e, const int32_t *prompt, int32_t n_prompt,
                                         const specdec_generate_params *p, int32_t *out_tokens, int32_t out_capacity,
                                         int32_t *n_out, specdec_stats *stats) {
    if (e->dead) return sd_fail(&e->err, SPECDEC_ERR_DEVICE_LOST, "engine lost its device earlier; it can only be freed");
    specdec_status st = sd_gen_check(e, prompt, n_prompt, p, out_tokens, out_capacity, n_out, &e->err);
    if (st != SPECDEC_OK) return st;
    specdec_detok_stream *ds = NULL;
    if (p->tokenizer && (st = specdec_detok_stream_create(p->tokenizer, 1, &ds)) != SPECDEC_OK)
        return sd_fail(&e->err, st, "specdec_generate: creating the streaming detokenizer: %s", specdec_last_error());
    const sd_gen_io io = {e->seq, out_tokens, e->text_win, &e->adapt, ds, stats, &e->err};
    sd_gen g;
    sd_gen_init(&g, &e->env, p, prompt, n_prompt, &io);
    sd_driver *dv = sd_engine_driver(e);
    sd_gen *one[1] = {&g};
    st = sd_driver_begin(dv, &g);
    while (st == SPECDEC_OK && sd_driver_round(dv, one, 1) == 1) st = g.status;
    if (sd_round_device_lost(dv->rd)) e->dead = 1;
    sd_gen_finish(&g, st, n_out);
    specdec_detok_stream_free(ds);
    return st;
}
specdec_status specdec_generate(specdec_engine *engine, const int32_t *prompt, int32_t n_prompt,
                                const specdec_generate_params *params, int32_t *out_tokens, int32_t out_capacity,
                                int32_t *n_out, specdec_stats *stats) {
    if (!engine) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_generate: engine is NULL");
    if (n_out) *n_out = 0;
    specdec_status st = sd_engine_enter(engine);
    if (st != SPECDEC_OK) return st;
    specdec_generate_params defaults;
    if (!params) {
        defaults = specdec_generate_default_params();
        params = &defaults;
    }
    specdec_stats local;
    st = sd_generate_locked(engine, prompt, n_prompt, params, out_tokens, out_capacity, n_out, stats ? stats : &local);
    sd_engine_leave(engine);
    return st;
}
